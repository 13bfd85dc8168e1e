// The run page: status, result and usage, the timeline with each bar's
// events, live text while the run runs (one event stream per open page),
// and the actions on the run.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, streamEvents } from '../api.js';
import { JSONView, ProblemBox, StatusBadge, finished } from '../common.js';
import { Timeline, attemptKey, formatTime } from '../timeline.js';
import { Controls, ExportForm, PendingCalls } from '../actions.js';
import { linkClick } from '../router.js';

const enc = encodeURIComponent;

// Events that change what the run page shows besides the live text: the
// run, its timeline and pending calls are fetched again (debounced).
const REFRESH_ON = new Set(['run_result', 'approval_required', 'recovery_required', 'attempt_reset', 'waiting',
  'tool_call_start', 'tool_result', 'turn_complete', 'text_complete', 'error']);

// eventsAfter reads the run's events after cursor `after` as JSON pages:
// them, and the cursor to go on from.
async function eventsAfter(runId, after, signal) {
  const out = [];
  for (let i = 0; i < 1000; i++) {
    const page = await api('GET', `/runs/${enc(runId)}/events`, { query: { after, limit: 1000 }, signal });
    out.push(...(page.events || []));
    if (!page.events || page.events.length === 0 || page.next_cursor === after) break;
    after = page.next_cursor;
  }
  return { events: out, after };
}

// namesCall: the event's data names the attempt's tool call.
function namesCall(ev, a) {
  const d = ev.data;
  if (!d || typeof d !== 'object') return false;
  if (a.call_id && (d.id === a.call_id || d.tool_call_id === a.call_id || (d.call && d.call.id === a.call_id))) return true;
  return !!(a.execution_key && d.execution_key === a.execution_key);
}

// eventsOf are the events of one attempt. A tool attempt's: the events of
// its step naming its call (they carry the attempt id of the model call
// that asked for it). A model attempt's: the events of its step committed
// from its start until the step's next model attempt starts (the first
// attempt also takes earlier ones). The events' attempt_id does not tell
// a retry's events from the first attempt's: after an attempt_reset they
// keep the step's first attempt id.
export function eventsOf(events, a, attempts) {
  if (a.kind === 'tool') return events.filter((ev) => ev.step_id === a.step_id && namesCall(ev, a));
  const starts = attempts.filter((x) => x.kind === 'model' && x.step_id === a.step_id)
    .map((x) => Date.parse(x.started_at)).sort((x, y) => x - y);
  const from = Date.parse(a.started_at);
  const i = starts.indexOf(from);
  const lo = i <= 0 ? -Infinity : from;
  const hi = i >= 0 && i + 1 < starts.length ? starts[i + 1] : Infinity;
  return events.filter((ev) => {
    if (ev.step_id !== a.step_id) return false;
    const t = Date.parse(ev.created_at);
    return Number.isNaN(t) ? ev.attempt_id === String(a.attempt) : t >= lo && t < hi;
  });
}

function BarDetail({ runId, attempt, attempts, version }) {
  const [events, setEvents] = useState(null);
  const [error, setError] = useState(null);
  // The run's events read so far and the cursor after them: a refresh
  // reads only newer ones (a run's events are only ever appended).
  const read = useRef({ runId: '', events: [], after: '0' });
  useEffect(() => {
    const ctl = new AbortController();
    setError(null);
    if (read.current.runId !== runId) read.current = { runId, events: [], after: '0' };
    const r = read.current;
    eventsAfter(runId, r.after, ctl.signal).then((page) => {
      if (ctl.signal.aborted) return; // the next refresh reads from r.after again
      r.events = r.events.concat(page.events);
      r.after = page.after;
      setEvents(r.events);
    }, (e) => { if (e.name !== 'AbortError') setError(e); });
    return () => ctl.abort();
  }, [runId, version]);
  const mine = events ? eventsOf(events, attempt, attempts) : [];
  return html`<section class="bar-detail card" data-testid="bar-detail" aria-live="polite" aria-labelledby="detail-h">
    <h2 id="detail-h">${attempt.kind === 'model' ? 'Model' : `Tool ${attempt.tool || ''}`} · step ${attempt.step_id} · attempt ${attempt.attempt}</h2>
    <dl class="facts">
      <dt>Outcome</dt><dd>${attempt.outcome}</dd>
      <dt>Started</dt><dd>${formatTime(attempt.started_at)}</dd>
      <dt>Ended</dt><dd>${attempt.ended_at ? formatTime(attempt.ended_at) : '—'}</dd>
      ${attempt.error ? html`<dt>Error</dt><dd>${attempt.error.type}: ${attempt.error.message}</dd>` : null}
      ${attempt.retry_wait_seconds ? html`<dt>Retry wait</dt><dd>${attempt.retry_wait_seconds} s</dd>` : null}
      ${attempt.model ? html`<dt>Model</dt><dd>${attempt.model}${attempt.provider ? ` (${attempt.provider})` : ''}</dd>` : null}
      ${attempt.execution_key ? html`<dt>Execution key</dt><dd><code>${attempt.execution_key}</code></dd>` : null}
      ${attempt.replay_policy ? html`<dt>Replay policy</dt><dd>${attempt.replay_policy}</dd>` : null}
      ${attempt.approval ? html`<dt>Approval</dt><dd>requested ${formatTime(attempt.approval.requested_at)}${attempt.approval.decided_at
        ? html`, ${attempt.approval.approved ? 'approved' : 'declined'} ${formatTime(attempt.approval.decided_at)}` : ', awaited'}</dd>` : null}
    </dl>
    <${ProblemBox} error=${error} />
    ${events === null && !error ? html`<p class="muted">Loading events…</p>` : null}
    ${events !== null && mine.length === 0 ? html`<p class="muted">No events of this attempt.</p>` : null}
    <ol class="events">
      ${mine.map((ev) => html`<li class="event" data-testid="event" data-type=${ev.type}>
        <div><strong>${ev.type}</strong> <span class="muted">#${ev.cursor} · ${formatTime(ev.created_at)}</span></div>
        <${JSONView} value=${ev.data} />
      </li>`)}
    </ol>
  </section>`;
}

function Usage({ usage, incomplete }) {
  if (!usage) return null;
  return html`<span>${usage.input_tokens} in / ${usage.output_tokens} out tokens${usage.cache_read_input_tokens ? `, ${usage.cache_read_input_tokens} cache read` : ''}${incomplete ? ' (incomplete)' : ''}</span>`;
}

export function RunPage({ id }) {
  const [run, setRun] = useState(null);
  const [timeline, setTimeline] = useState(null);
  const [pending, setPending] = useState([]);
  const [error, setError] = useState(null);
  const [tlError, setTlError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [liveText, setLiveText] = useState('');
  const [version, setVersion] = useState(0);
  const cursor = useRef('');
  const liveStep = useRef('');
  const timer = useRef(0);

  const refresh = useCallback(async () => {
    try {
      const r = await api('GET', `/runs/${enc(id)}`);
      setRun(r);
      setError(null);
      const [tl, pd] = await Promise.allSettled([
        api('GET', `/runs/${enc(id)}/timeline`),
        api('GET', `/sessions/${enc(r.session_id)}/pending`),
      ]);
      if (tl.status === 'fulfilled') { setTimeline(tl.value); setTlError(null); } else setTlError(tl.reason);
      setPending(pd.status === 'fulfilled' ? (pd.value.items || []) : []);
      setVersion((v) => v + 1);
    } catch (e) {
      setError(e);
    }
  }, [id]);

  const refreshSoon = useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(refresh, 250);
  }, [refresh]);

  useEffect(() => { refresh(); return () => clearTimeout(timer.current); }, [refresh]);

  // While the run runs: one event stream, resumed with Last-Event-ID after
  // a broken connection (backoff), until the server ends it.
  const live = !!run && !finished(run.status);
  useEffect(() => {
    if (!live) return undefined;
    const ctl = new AbortController();
    let stopped = false;
    (async () => {
      let backoff = 500;
      while (!stopped) {
        let ended = false;
        try {
          for await (const ev of streamEvents(id, { lastEventId: cursor.current, signal: ctl.signal })) {
            backoff = 500;
            if (ev.cursor) cursor.current = ev.cursor;
            if (ev.type === 'text_delta') {
              if (liveStep.current !== ev.step_id) { liveStep.current = ev.step_id; setLiveText(''); }
              setLiveText((t) => t + (typeof ev.data === 'string' ? ev.data : ''));
            } else if (ev.type === 'attempt_reset' && ev.step_id === liveStep.current) {
              setLiveText('');
            }
            if (REFRESH_ON.has(ev.type)) refreshSoon();
          }
          ended = true;
        } catch (e) {
          if (stopped || e.name === 'AbortError') return;
          if (e.status && e.status < 500 && e.status !== 408 && e.status !== 429) { setError(e); return; }
        }
        if (stopped) return;
        if (ended) {
          // The server ends the stream once the run stopped: show where it
          // stopped; follow on only if it still runs (a dropped stream).
          refreshSoon();
          const r = await api('GET', `/runs/${enc(id)}`, { signal: ctl.signal }).catch(() => null);
          if (stopped || !r || finished(r.status)) return;
        }
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10000);
      }
    })();
    return () => { stopped = true; ctl.abort(); };
  }, [id, live, refreshSoon]);

  if (error && !run) return html`<section><h1>Run</h1><${ProblemBox} error=${error} /></section>`;
  if (!run) return html`<section><h1>Run</h1><p class="muted">Loading…</p></section>`;

  const attempts = timeline ? timeline.attempts || [] : [];
  const sel = selected ? attempts.find((a) => attemptKey(a) === selected) : null;
  return html`<section class="run">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${linkClick}>Sessions</a> ›
      <a href=${'/ui/sessions/' + enc(run.session_id)} onClick=${linkClick}>${run.session_id}</a> › run</nav>
    <h1>Run <code class="id">${run.run_id}</code></h1>
    <dl class="facts">
      <dt>Status</dt><dd><${StatusBadge} status=${run.status} testid="run-status" /></dd>
      <dt>Created</dt><dd>${formatTime(run.created_at)}</dd>
      <dt>Updated</dt><dd>${formatTime(run.updated_at)}</dd>
      <dt>Usage</dt><dd><${Usage} usage=${run.usage} incomplete=${run.usage_incomplete} /></dd>
      ${run.stop_reason ? html`<dt>Stop reason</dt><dd>${run.stop_reason}</dd>` : null}
    </dl>
    <${ProblemBox} error=${error} />
    ${run.error ? html`<div class="run-error" role="status"><strong>Error</strong> <${JSONView} value=${run.error} /></div>` : null}
    ${live || liveText ? html`<section aria-labelledby="live-h"><h2 id="live-h">${live ? 'Live' : 'Last streamed text'}</h2>
      <p class="live-text" data-testid="live-text" aria-live="polite">${liveText}</p></section>` : null}
    ${run.output !== null && run.output !== undefined ? html`<section aria-labelledby="out-h"><h2 id="out-h">Result</h2>
      <p class="output" data-testid="run-output">${run.output}</p></section>` : null}
    <${PendingCalls} sessionId=${run.session_id} items=${pending} onChange=${refresh} />
    <${Controls} sessionId=${run.session_id} status=${run.status} onChange=${refresh} />
    <section aria-labelledby="tl-h">
      <h2 id="tl-h">Timeline</h2>
      ${tlError ? html`<${ProblemBox} error=${tlError} />` : null}
      <${Timeline} timeline=${timeline} selected=${selected} onSelect=${(a) => setSelected(attemptKey(a))} />
    </section>
    ${sel ? html`<${BarDetail} runId=${id} attempt=${sel} attempts=${attempts} version=${version} />` : null}
    <${ExportForm} runId=${id} />
  </section>`;
}
