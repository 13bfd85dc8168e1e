// Small pieces shared by the pages.
import { html } from './html.js';

export const RUN_STATUSES = ['running', 'completed', 'paused', 'awaiting_input', 'cancelled', 'failed'];

// finished: the run will not change by itself (no stream to follow).
export function finished(status) {
  return status !== 'running';
}

// ProblemBox shows an action's refusal: the problem's title and detail.
export function ProblemBox({ error }) {
  if (!error) return null;
  const title = error.title || 'Error';
  const detail = error.detail || (error.title ? '' : String(error.message || error));
  return html`<div class="problem" role="alert" data-testid="problem">
    <strong>${title}</strong>${detail ? html`: <span>${detail}</span>` : null}
    ${error.code ? html` <code>${error.code}</code>` : null}
  </div>`;
}

export function StatusBadge({ status, testid }) {
  if (!status) return html`<span class="status status-none">no run</span>`;
  return html`<span class=${'status status-' + status} data-testid=${testid}>${status}</span>`;
}

// JSONView shows a value as the API returned it.
export function JSONView({ value }) {
  return html`<pre class="json">${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</pre>`;
}

export function agentLabel(a) {
  return a ? `${a.name}@${a.version}` : '';
}

// seconds formats a duration in seconds for people.
export function seconds(s) {
  if (s === undefined || s === null) return '';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${(Math.round(s * 10) / 10).toString()} s`;
  return `${Math.round(s / 60)} min`;
}
