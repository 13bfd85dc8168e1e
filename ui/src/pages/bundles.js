// The bundle inspector (stub until it lands).
import { html } from '../html.js';

export function BundlesPage() {
  return html`<section><h1>Bundles</h1><p>The bundle inspector is not built yet.</p></section>`;
}
