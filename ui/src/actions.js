// Steering a run: pending calls (approve, decline, resolve), pause,
// resume, cancel and export. Every refusal is shown as the API's problem.
import { useState } from 'preact/hooks';
import { html } from './html.js';
import { api } from './api.js';
import { JSONView, ProblemBox } from './common.js';

const enc = encodeURIComponent;

// continueRun resumes the session's run once no decision is left: a
// decided call only continues the run when someone resumes it.
async function continueRun(sessionId) {
  const left = await api('GET', `/sessions/${enc(sessionId)}/pending`);
  if ((left.items || []).length === 0) await api('POST', `/sessions/${enc(sessionId)}/resume`, { body: {} });
}

function PendingCall({ sessionId, item, onDone }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [text, setText] = useState('');
  const key = item.execution_key;
  const run = async (f) => {
    setBusy(true);
    setError(null);
    try {
      await f();
      onDone && onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const decide = (allow) => run(async () => {
    await api('POST', `/sessions/${enc(sessionId)}/tools/${enc(key)}/approve`, { body: { allow, resume: false } });
    await continueRun(sessionId);
  });
  const resolve = (body, resume) => run(async () => {
    await api('POST', `/sessions/${enc(sessionId)}/tools/${enc(key)}/resolve`, { body });
    if (resume) await continueRun(sessionId);
  });
  const approval = item.status === 'approval';
  return html`<li class="pending card" data-testid="pending-call" data-execution-key=${key}>
    <div><strong>${item.call.name}</strong> <span class="muted">${approval ? 'awaits approval' : `outcome ${item.status}`}</span>
      <span class="muted"> · attempt ${item.attempt} · policy ${item.policy}</span></div>
    <details><summary>Input</summary><${JSONView} value=${item.call.input} /></details>
    ${approval ? html`<div class="buttons">
      <button data-testid="approve" disabled=${busy} onClick=${() => decide(true)}>Approve</button>
      <button data-testid="decline" class="secondary" disabled=${busy} onClick=${() => decide(false)}>Decline</button>
    </div>` : html`<div class="resolve">
      <label for=${'res-' + key}>Verified result</label>
      <textarea id=${'res-' + key} rows="2" value=${text} onInput=${(e) => setText(e.target.value)}
        placeholder="What the tool did (given to the model as its result)"></textarea>
      <div class="buttons">
        <button data-testid="resolve-result" disabled=${busy || !text.trim()}
          onClick=${() => resolve({ result: { tool_call_id: item.call.id, content: text, is_error: false } }, true)}>Use this result</button>
        <button data-testid="resolve-retry" class="secondary" disabled=${busy} onClick=${() => resolve({ retry: true }, true)}>Retry the tool</button>
        <button data-testid="resolve-abort" class="danger" disabled=${busy} onClick=${() => resolve({ abort: true }, false)}>Abort the run</button>
      </div>
    </div>`}
    <${ProblemBox} error=${error} />
  </li>`;
}

// PendingCalls lists the calls awaiting a decision (items of GET
// /sessions/{id}/pending); onChange is called after each decision.
export function PendingCalls({ sessionId, items, onChange }) {
  if (!items || items.length === 0) return null;
  return html`<section aria-labelledby="pending-h">
    <h2 id="pending-h">Awaiting a decision</h2>
    <ul class="plain">${items.map((it) => html`<${PendingCall} key=${it.execution_key} sessionId=${sessionId} item=${it} onDone=${onChange} />`)}</ul>
  </section>`;
}

// Controls are pause, resume and cancel of the session's latest run.
export function Controls({ sessionId, status, onChange }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const act = async (what) => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', `/sessions/${enc(sessionId)}/${what}`, what === 'resume' ? { body: {} } : {});
      onChange && onChange();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const unfinished = status === 'running' || status === 'paused' || status === 'awaiting_input';
  return html`<div class="controls">
    <div class="buttons">
      <button data-testid="pause" class="secondary" disabled=${busy || status !== 'running'} onClick=${() => act('pause')}>Pause</button>
      <button data-testid="resume" class="secondary" disabled=${busy || status === 'running' || status === 'completed' || !status} onClick=${() => act('resume')}>Resume</button>
      <button data-testid="cancel" class="danger" disabled=${busy || !unfinished} onClick=${() => act('cancel')}>Cancel</button>
    </div>
    <${ProblemBox} error=${error} />
  </div>`;
}

function filenameOf(resp, runId) {
  const cd = resp.headers.get('Content-Disposition') || '';
  const m = cd.match(/filename="([^"]+)"/);
  return m ? m[1] : `${runId}.hx`;
}

// ExportForm exports the run as a .hx bundle with the contract's export
// options and saves it through a Blob.
export function ExportForm({ runId }) {
  const [payloads, setPayloads] = useState(false);
  const [artifacts, setArtifacts] = useState(false);
  const [redact, setRedact] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [done, setDone] = useState('');
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setDone('');
    const body = { include_payloads: payloads, include_artifacts: artifacts };
    if (redact.trim()) {
      try {
        body.redact = JSON.parse(redact);
      } catch (err) {
        setError({ title: 'Redaction rules are not JSON', detail: String(err.message || err) });
        return;
      }
    }
    setBusy(true);
    try {
      const resp = await api('POST', `/runs/${enc(runId)}/export`, { body, raw: true,
        headers: { Accept: 'application/vnd.harnessx.incident+zip, application/problem+json' } });
      const blob = await resp.blob();
      const name = filenameOf(resp, runId);
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      setDone(`${name} (${blob.size} bytes)`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<section class="export" aria-labelledby="export-h">
    <h2 id="export-h">Export as .hx</h2>
    <form onSubmit=${submit}>
      <label class="check"><input type="checkbox" data-testid="export-payloads" checked=${payloads} onChange=${(e) => setPayloads(e.target.checked)} /> Include payloads (redacted)</label>
      <label class="check"><input type="checkbox" data-testid="export-artifacts" checked=${artifacts} onChange=${(e) => setArtifacts(e.target.checked)} /> Include artifacts (needs payloads)</label>
      <label for="redact">Redaction rules (JSON array, optional)</label>
      <textarea id="redact" rows="2" value=${redact} onInput=${(e) => setRedact(e.target.value)}
        placeholder='[{"pattern": "acct-[0-9]+", "replace": "acct-…"}]'></textarea>
      <button data-testid="export" type="submit" disabled=${busy}>Export</button>
      ${done ? html`<span class="muted" role="status" data-testid="export-done">Saved ${done}</span>` : null}
    </form>
    <${ProblemBox} error=${error} />
  </section>`;
}
