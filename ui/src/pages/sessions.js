import { html } from '../html.js';
export function SessionsPage() { return html`<section><h1>Sessions</h1></section>`; }
