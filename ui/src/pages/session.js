import { html } from '../html.js';
export function SessionPage({ id }) { return html`<section><h1>Session ${id}</h1></section>`; }
