// The run timeline: one lane for model calls and one per tool; each
// attempt is a bar from its start to its end on a shared time axis, with
// its retry wait after it and the run's marks (pause, cancel, approvals,
// resets) as ticks across the lanes.
import { html } from './html.js';
import { seconds } from './common.js';

const dateFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
});

// localTime is iso in the viewer's time zone (the ISO text when it does
// not parse).
export function localTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso || '') : dateFmt.format(d);
}

// formatTime renders iso in the viewer's time zone, with the UTC value as
// the title (shown on hover).
export function formatTime(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  const utc = Number.isNaN(d.getTime()) ? String(iso) : d.toISOString();
  return html`<time datetime=${utc} title=${utc + ' (UTC)'}>${localTime(iso)}</time>`;
}

const ms = (iso) => (iso ? new Date(iso).getTime() : NaN);

const OUTCOME_TEXT = {
  running: 'running', succeeded: 'succeeded', failed: 'failed', retrying: 'failed, retried',
  uncertain: 'uncertain outcome', awaiting_approval: 'awaiting approval', declined: 'declined',
  reset: 'reset (attempt_reset)', cancelled: 'cancelled', aborted: 'aborted',
};

// OUTCOME_SHORT is the outcome written on a bar (the label says more).
const OUTCOME_SHORT = { ...OUTCOME_TEXT, retrying: 'failed', reset: 'reset' };

const MARK_TEXT = {
  paused: 'paused', resumed: 'resumed', cancelled: 'cancelled', approval_required: 'approval required',
  approval_given: 'approval given', approval_declined: 'approval declined', resolved: 'resolved',
  attempt_reset: 'attempt reset', failed: 'failed', completed: 'completed',
};

// span is the time range the timeline shows: from the run's creation to
// its last change (now while it runs).
function span(tl, now) {
  let lo = ms(tl.created_at);
  let hi = ms(tl.updated_at);
  for (const a of tl.attempts || []) {
    const s = ms(a.started_at);
    if (!Number.isNaN(s)) {
      if (Number.isNaN(lo) || s < lo) lo = s;
      let e = a.ended_at ? ms(a.ended_at) : now;
      if (a.retry_wait_seconds) e += a.retry_wait_seconds * 1000;
      if (Number.isNaN(hi) || e > hi) hi = e;
    }
  }
  for (const m of tl.marks || []) {
    const t = ms(m.at);
    if (!Number.isNaN(t) && (Number.isNaN(hi) || t > hi)) hi = t;
  }
  if (tl.status === 'running' && now > hi) hi = now;
  if (Number.isNaN(lo)) lo = now;
  if (Number.isNaN(hi) || hi <= lo) hi = lo + 1000;
  return { lo, hi, len: hi - lo };
}

function ticks(len) {
  const steps = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000];
  const step = steps.find((s) => len / s <= 8) || len / 8;
  const out = [];
  for (let t = 0; t <= len; t += step) out.push(t);
  return out;
}

function tickLabel(t) {
  return t < 1000 ? `${t} ms` : seconds(t / 1000);
}

export function attemptKey(a) {
  return `${a.lane}|${a.step_id}|${a.attempt}|${a.call_id || ''}`;
}

function barLabel(a, laneName) {
  const parts = [`${laneName}, step ${a.step_id}, attempt ${a.attempt}: ${OUTCOME_TEXT[a.outcome] || a.outcome}`];
  if (a.error) parts.push(`${a.error.type}: ${a.error.message}`);
  if (a.started_at && a.ended_at) parts.push(seconds((ms(a.ended_at) - ms(a.started_at)) / 1000));
  if (a.retry_wait_seconds) parts.push(`then waited ${seconds(a.retry_wait_seconds)} before retrying`);
  if (a.approval) {
    if (a.approval.decided_at) parts.push(a.approval.approved ? 'approved' : 'declined');
    else parts.push('approval awaited');
  }
  return parts.join('; ');
}

function laneName(l) {
  return l.kind === 'model' ? 'model' : (l.tool || l.id.replace(/^tool:/, ''));
}

// Timeline renders a RunTimeline. onSelect(attempt) is called when a bar
// is activated (click, Enter or Space: bars are buttons); selected is the
// selected attempt's key (attemptKey).
export function Timeline({ timeline, onSelect, selected }) {
  if (!timeline) return null;
  const now = Date.now();
  const { lo, len } = span(timeline, now);
  const pct = (t) => `${Math.max(0, Math.min(100, ((t - lo) / len) * 100))}%`;
  const lanes = timeline.lanes || [];
  const attempts = timeline.attempts || [];
  const marks = timeline.marks || [];
  const names = Object.fromEntries(lanes.map((l) => [l.id, laneName(l)]));

  const bar = (a) => {
    const s = ms(a.started_at);
    const e = a.ended_at ? ms(a.ended_at) : now;
    const left = pct(s);
    const width = `max(${((Math.max(e - s, 0)) / len) * 100}%, 2.2rem)`;
    const label = barLabel(a, names[a.lane] || a.lane);
    const key = attemptKey(a);
    const wait = a.retry_wait_seconds ? html`<span class="wait" aria-hidden="true" title=${`retry wait ${seconds(a.retry_wait_seconds)}`}
      style=${{ left: pct(e), width: `${((a.retry_wait_seconds * 1000) / len) * 100}%` }}></span>` : null;
    const approval = a.approval ? html`<span class=${'approval' + (a.approval.decided_at ? (a.approval.approved ? ' approved' : ' declined') : ' awaited')}
      aria-hidden="true" style=${{ left: pct(ms(a.approval.requested_at)),
        width: `${(((a.approval.decided_at ? ms(a.approval.decided_at) : now) - ms(a.approval.requested_at)) / len) * 100}%` }}></span>` : null;
    return html`${approval}<button type="button" class=${'bar outcome-' + a.outcome + (selected === key ? ' selected' : '')}
        data-testid="bar" data-lane=${a.lane} data-attempt=${String(a.attempt)} data-outcome=${a.outcome} data-step=${a.step_id}
        aria-label=${label} title=${label} aria-pressed=${selected === key ? 'true' : 'false'}
        style=${{ left, width }} onClick=${() => onSelect && onSelect(a)}>
        <span class="bar-text">#${a.attempt}${a.outcome === 'succeeded' ? '' : ' ' + (OUTCOME_SHORT[a.outcome] || a.outcome)}</span>
      </button>${wait}`;
  };

  return html`<div class="timeline" data-testid="timeline">
    <div class="timeline-scroll">
      <div class="timeline-inner" role="grid" aria-label="Run timeline: attempts by lane over time" aria-rowcount=${lanes.length + 2}>
        <div class="lane axis" role="row">
          <div class="lane-name" role="rowheader">time</div>
          <div class="track" role="gridcell">
            ${ticks(len).map((t) => html`<span class="tick" style=${{ left: pct(lo + t) }}>${tickLabel(t)}</span>`)}
          </div>
        </div>
        ${lanes.map((l) => html`<div class="lane" role="row" data-testid="lane" data-lane=${l.id}>
          <div class="lane-name" role="rowheader" title=${l.id}>${names[l.id]}</div>
          <div class="track" role="gridcell">
            ${attempts.filter((a) => a.lane === l.id).map(bar)}
            ${marks.map((m) => html`<span class="mark-line" aria-hidden="true" style=${{ left: pct(ms(m.at)) }}></span>`)}
          </div>
        </div>`)}
        <div class="lane marks" role="row">
          <div class="lane-name" role="rowheader">marks</div>
          <div class="track" role="gridcell">
            ${marks.map((m) => {
              const text = `${MARK_TEXT[m.type] || m.type}${m.step_id ? ' (step ' + m.step_id + ')' : ''}${m.detail ? ': ' + m.detail : ''}`;
              return html`<span role="img" tabindex="0" class=${'mark mark-' + m.type} data-testid="mark" data-type=${m.type}
                style=${{ left: pct(ms(m.at)) }} aria-label=${`${text} at ${new Date(m.at).toISOString()}`}
                title=${`${text} — ${new Date(m.at).toISOString()}`}>${MARK_TEXT[m.type] || m.type}</span>`;
            })}
          </div>
        </div>
      </div>
    </div>
    <ul class="legend" aria-label="Legend">
      <li><span class="swatch outcome-succeeded"></span>succeeded</li>
      <li><span class="swatch outcome-retrying"></span>failed / retried</li>
      <li><span class="swatch wait-swatch"></span>retry wait</li>
      <li><span class="swatch outcome-uncertain"></span>uncertain</li>
      <li><span class="swatch outcome-awaiting_approval"></span>awaiting approval</li>
      <li><span class="swatch outcome-reset"></span>reset</li>
      <li><span class="swatch outcome-running"></span>running</li>
    </ul>
  </div>`;
}
