// A minimal stand-in for the Timeline component (engineer B's, on branch
// ui-core) so that the bundle inspector builds and its tests run before it
// lands: B's timeline.js replaces this file as it is.
import { html } from './html.js';

export function formatTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : html`<time datetime=${d.toISOString()} title=${d.toISOString()}>${d.toLocaleString()}</time>`;
}

export function Timeline({ timeline, onSelect, selected }) {
  return html`<div data-testid="timeline" role="list" aria-label="Timeline">
    ${timeline.lanes.map((l) => html`<div key=${l.id} data-testid="lane" data-lane=${l.id} role="listitem" aria-label=${l.id}>
      <span>${l.kind === 'model' ? 'model' : l.tool}</span>
      ${timeline.attempts.filter((a) => a.lane === l.id).map((a) => html`<button type="button" data-testid="bar"
        data-lane=${a.lane} data-attempt=${a.attempt} data-outcome=${a.outcome} data-step=${a.step_id}
        aria-pressed=${selected === a} aria-label=${`step ${a.step_id}, attempt ${a.attempt}: ${a.outcome}`}
        onClick=${() => onSelect(a)}>${a.step_id}.${a.attempt} ${a.outcome}</button>`)}
    </div>`)}
  </div>`;
}
