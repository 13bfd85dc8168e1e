// pages/bundles.js: the offline inspector of `.hx` bundles (/ui/bundles).
//
// A dropped or chosen file is sent as it is to POST /bundles/verify and,
// when the verdict is valid, to POST /bundles/playback; the page shows the
// report, the timeline rebuilt from the records (records.js) and the
// artifacts catalog. Nothing is executed, and the bundle is kept only in
// this page's memory: the server verifies and forgets it.
import { useRef, useState } from 'preact/hooks';

import { ProblemError } from '../api.js';
import { getToken, onUnauthorized } from '../auth.js';
import { html } from '../html.js';
import { Timeline, attemptKey, formatTime } from '../timeline.js';
import { recordsOfAttempt, timelineFromRecords } from '../records.js';

const BUNDLE_TYPE = 'application/vnd.harnessx.incident+zip';

// post sends the archive bytes as the raw request body (api() sends
// JSON bodies), with the same bearer token and problem handling as api().
async function post(path, bytes) {
  const headers = { Accept: 'application/json', 'Content-Type': BUNDLE_TYPE };
  const t = getToken();
  if (t) headers.Authorization = `Bearer ${t}`;
  const resp = await fetch(path, { method: 'POST', headers, body: bytes });
  if (!resp.ok) {
    let p = null;
    if ((resp.headers.get('Content-Type') || '').includes('json')) {
      try { p = await resp.json(); } catch { p = null; }
    }
    if (resp.status === 401) onUnauthorized();
    throw new ProblemError(resp.status, p || { title: resp.statusText || `HTTP ${resp.status}` });
  }
  return resp.json();
}

export function BundlesPage() {
  const [state, setState] = useState({ phase: 'idle' });
  const [selected, setSelected] = useState(null);
  const [dragging, setDragging] = useState(false);
  const input = useRef(null);
  const seq = useRef(0);

  const open = async (file) => {
    if (!file) return;
    const n = ++seq.current;
    setSelected(null);
    setState({ phase: 'busy', name: file.name });
    try {
      const bytes = await file.arrayBuffer();
      const report = await post('/bundles/verify', bytes);
      let played = null;
      let problem = null;
      if (report.valid) {
        try {
          played = await post('/bundles/playback', bytes);
        } catch (e) {
          if (!(e instanceof ProblemError)) throw e;
          problem = e;
        }
      }
      if (n !== seq.current) return;
      const timeline = played ? timelineFromRecords(played.records, played.manifest) : null;
      setState({ phase: 'done', name: file.name, size: file.size, report, played, timeline, problem });
    } catch (e) {
      if (n !== seq.current) return;
      setState({ phase: 'error', name: file.name, error: e });
    }
  };

  const onDrop = (ev) => {
    ev.preventDefault();
    setDragging(false);
    open(ev.dataTransfer?.files?.[0]);
  };
  const onKey = (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      input.current?.click();
    }
  };

  return html`
    <section class="bundles" aria-labelledby="bundles-title">
      <h1 id="bundles-title">Bundle inspector</h1>
      <p>Open a <code>.hx</code> incident bundle to check it and replay its run. The server verifies it and
        plays it back without running anything; nothing is stored.</p>
      <div class=${'drop-zone' + (dragging ? ' dragging' : '')} data-testid="drop-zone" role="button" tabindex="0"
        aria-label="Drop a .hx bundle here, or press Enter to choose one"
        onKeyDown=${onKey} onClick=${() => input.current?.click()}
        onDragOver=${(ev) => { ev.preventDefault(); setDragging(true); }}
        onDragLeave=${() => setDragging(false)} onDrop=${onDrop}>
        Drop a <code>.hx</code> file here, or
        <label class="file-label" onClick=${(ev) => ev.stopPropagation()}>
          choose one
          <input ref=${input} type="file" accept=".hx" data-testid="bundle-input"
            onClick=${(ev) => ev.stopPropagation()}
            onChange=${(ev) => { open(ev.currentTarget.files?.[0]); ev.currentTarget.value = ''; }} />
        </label>
      </div>
      ${state.phase === 'busy' && html`<p role="status">Verifying ${state.name}…</p>`}
      ${state.phase === 'error' && html`<${Failure} error=${state.error} />`}
      ${state.phase === 'done' && html`<${Inspection} state=${state} selected=${selected} onSelect=${setSelected} />`}
    </section>`;
}

function Failure({ error }) {
  if (error instanceof ProblemError) {
    return html`<div class="problem" role="alert" data-testid="problem">
      <strong>${error.title}</strong>${error.detail ? html`: ${error.detail}` : ''}</div>`;
  }
  return html`<div class="problem" role="alert" data-testid="problem">${String(error?.message ?? error)}</div>`;
}

function Inspection({ state, selected, onSelect }) {
  const { report, played, timeline, problem } = state;
  const records = played?.records ?? [];
  const attempt = selected && timeline ? timeline.attempts.find((a) => attemptKey(a) === selected) : null;
  return html`
    <section class="card" aria-labelledby="report-title">
      <h2 id="report-title">Verification of ${state.name}</h2>
      <p data-testid="verify-summary" class=${'verdict ' + (report.valid ? 'ok' : 'bad')}>
        ${report.valid ? 'valid' : 'invalid'}, ${report.complete ? 'complete' : 'incomplete'}
        ${report.valid ? ` — ${report.record_count} records` : ''}
      </p>
      ${report.signature && html`<p data-testid="verify-signature" data-status=${report.signature.status}
        class=${'verdict signature ' + (report.signature.status === 'valid' ? 'ok' : 'bad')}>${signatureText(report.signature)}</p>`}
      ${report.issues.length > 0 && html`
        <ol class="issues">
          ${report.issues.map((issue, i) => html`<${Issue} key=${i} issue=${issue}
            details=${(report.details ?? []).filter((d) => d.issue === issue)} records=${records} />`)}
        </ol>`}
      ${problem && html`<${Failure} error=${problem} />`}
    </section>
    ${played && html`
      <${Manifest} manifest=${played.manifest} />
      <section aria-labelledby="timeline-title">
        <h2 id="timeline-title">Timeline</h2>
        ${timeline.attempts.length === 0
          ? html`<p>No model or tool attempt is recorded in this bundle.</p>`
          : html`<${Timeline} timeline=${timeline} onSelect=${(a) => onSelect(attemptKey(a))} selected=${selected} />`}
        ${attempt && html`<${Records} attempt=${attempt} records=${recordsOfAttempt(records, attempt)} />`}
      </section>
      <${Artifacts} manifest=${played.manifest} artifacts=${played.artifacts} />`}`;
}

// signatureText explains a report's signature verdict (checked against
// this server's keys, GET /.well-known/hxd-bundle-keys).
function signatureText({ status, kid }) {
  switch (status) {
    case 'valid': return `signed by this server (key ${kid})`;
    case 'invalid': return 'signature invalid: the bundle was changed after it was signed';
    case 'unknown_key': return `signed by a key this server does not know (${kid})`;
    default: return 'not signed';
  }
}

function Issue({ issue, details, records }) {
  return html`<li data-testid="verify-issue">
    <span class="issue-message">${issue}</span>
    ${details.length > 0 && html`<ul class="issue-details">
      ${details.slice(0, 50).map((d, i) => html`<li key=${i}>${detailText(d, records)}</li>`)}
      ${details.length > 50 && html`<li>… ${details.length - 50} more</li>`}
    </ul>`}
  </li>`;
}

function detailText(d, records) {
  const parts = [];
  if (d.message) parts.push(d.message);
  if (d.member) parts.push(`member ${d.member}`);
  if (d.seq) {
    const r = records[d.seq - 1];
    parts.push(`record ${d.seq}` + (r && typeof r.id === 'string' ? ` (id ${r.id})` : ''));
  }
  if (d.kind) parts.push(`kind ${d.kind}`);
  if (d.step_id !== undefined) parts.push(`step ${d.step_id}`);
  if (d.attempt_id !== undefined) parts.push(`attempt ${d.attempt_id}`);
  if (d.execution_key) parts.push(`call ${d.execution_key}`);
  return parts.join(', ');
}

function Manifest({ manifest }) {
  const m = manifest ?? {};
  const agent = m.agent && typeof m.agent === 'object' ? `${m.agent.name}@${m.agent.version}` : '—';
  return html`<section class="card" aria-labelledby="manifest-title">
    <h2 id="manifest-title">Run</h2>
    <dl class="facts">
      <dt>Run</dt><dd><code>${m.run_id}</code></dd>
      <dt>Session</dt><dd><code>${m.session_id}</code></dd>
      <dt>Agent</dt><dd>${agent}</dd>
      <dt>Status</dt><dd>${m.status} (phase ${m.phase})</dd>
      <dt>Exported</dt><dd>${m.created_at ? formatTime(m.created_at) : '—'}</dd>
    </dl>
  </section>`;
}

function Records({ attempt, records }) {
  const what = attempt.kind === 'model' ? 'model' : attempt.tool ?? attempt.call_id;
  return html`<section class="card bar-detail" data-testid="bar-detail" aria-label="Records of the selected attempt" tabindex="-1">
    <h3>${what}, step ${attempt.step_id}, attempt ${attempt.attempt}: ${attempt.outcome}</h3>
    ${records.length === 0 ? html`<p>No record of this attempt.</p>` : html`
      <ol class="records plain">
        ${records.map((r) => html`<li key=${r.seq} data-testid="record" data-kind=${r.kind}>
          <div><strong>${r.kind === 'event' && r.payload?.type ? `event ${r.payload.type}` : r.kind}</strong> · record ${r.seq} · ${formatTime(r.recorded_at)}
            ${r.capture !== 'present' ? html` · payload ${r.capture}` : ''}</div>
          ${r.payload !== null && html`<pre class="json">${JSON.stringify(r.payload, null, 2)}</pre>`}
        </li>`)}
      </ol>`}
  </section>`;
}

function Artifacts({ manifest, artifacts }) {
  const sizes = new Map((artifacts ?? []).map((a) => [a.sha256, a.size]));
  const catalog = manifest?.artifacts && typeof manifest.artifacts === 'object' ? manifest.artifacts : {};
  const keys = [...new Set([...Object.keys(catalog), ...sizes.keys()])].sort();
  return html`<section aria-labelledby="artifacts-title">
    <h2 id="artifacts-title">Artifacts</h2>
    ${keys.length === 0 ? html`<p>The run references no artifact.</p>` : html`
      <div class="table-wrap"><table class="artifacts">
        <thead><tr><th scope="col">SHA-256</th><th scope="col">Status</th><th scope="col">Size</th></tr></thead>
        <tbody>
          ${keys.map((k) => html`<tr key=${k} data-testid="artifact" data-sha256=${k}>
            <td><code>${k}</code></td>
            <td>${catalog[k]?.status ?? 'included'}${catalog[k]?.reason ? ` (${catalog[k].reason})` : ''}</td>
            <td>${sizes.has(k) ? `${sizes.get(k)} bytes` : '—'}</td>
          </tr>`)}
        </tbody>
      </table></div>`}
  </section>`;
}
