import { html } from '../html.js';
export function RunPage({ id }) { return html`<section><h1>Run ${id}</h1></section>`; }
