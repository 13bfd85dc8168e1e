// The session page: its details and pinned MCP tools, its runs, starting
// a run, pause/resume/cancel of its latest run and its pending calls.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api } from '../api.js';
import { JSONView, ProblemBox, StatusBadge, agentLabel } from '../common.js';
import { formatTime } from '../timeline.js';
import { Controls, PendingCalls } from '../actions.js';
import { linkClick, navigate } from '../router.js';

const enc = encodeURIComponent;

// StartRunForm submits a message to the session and opens the new run.
export function StartRunForm({ sessionId }) {
  const [message, setMessage] = useState('');
  const [stream, setStream] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    if (!message.trim()) return;
    setBusy(true);
    setError(null);
    try {
      const r = await api('POST', `/sessions/${enc(sessionId)}/runs`, { body: { message, stream } });
      navigate(`/ui/runs/${enc(r.run_id)}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const fid = `msg-${sessionId}`;
  return html`<form class="start-run" data-testid="start-run" onSubmit=${submit}>
    <label for=${fid}>Message</label>
    <textarea id=${fid} data-testid="run-message" rows="3" maxlength="1000000" value=${message}
      onInput=${(e) => setMessage(e.target.value)} placeholder="What should the agent do?"></textarea>
    <div class="row">
      <label class="check"><input type="checkbox" data-testid="run-stream" checked=${stream} onChange=${(e) => setStream(e.target.checked)} /> Stream the answer</label>
      <button type="submit" data-testid="start-run-submit" disabled=${busy || !message.trim()}>Start run</button>
    </div>
    <${ProblemBox} error=${error} />
  </form>`;
}

export function SessionPage({ id }) {
  const [session, setSession] = useState(null);
  const [runs, setRuns] = useState(null);
  const [cursors, setCursors] = useState(['']);
  const [pending, setPending] = useState([]);
  const [error, setError] = useState(null);
  const at = cursors.length - 1;

  const refresh = useCallback(async () => {
    try {
      const [s, r, p] = await Promise.all([
        api('GET', `/sessions/${enc(id)}`),
        api('GET', `/sessions/${enc(id)}/runs`, { query: { limit: 20, cursor: cursors[at] } }),
        api('GET', `/sessions/${enc(id)}/pending`),
      ]);
      setSession(s);
      setRuns(r);
      setPending(p.items || []);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [id, cursors]);
  useEffect(() => { refresh(); }, [refresh]);

  if (!session) return html`<section><h1>Session ${id}</h1>${error ? html`<${ProblemBox} error=${error} />` : html`<p class="muted">Loading…</p>`}</section>`;
  const latest = session.latest_run;
  return html`<section class="session">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${linkClick}>Sessions</a> › ${session.session_id}</nav>
    <h1>Session <code class="id">${session.session_id}</code></h1>
    <dl class="facts">
      <dt>Agent</dt><dd>${agentLabel(session.agent)}</dd>
      <dt>Created</dt><dd>${formatTime(session.created_at)}</dd>
      <dt>Recording</dt><dd>${session.recording ? 'on' : 'off'}</dd>
      <dt>Latest run</dt><dd>${latest ? html`<a href=${'/ui/runs/' + enc(latest.run_id)} onClick=${linkClick}><${StatusBadge} status=${latest.status} /></a>` : html`<${StatusBadge} />`}</dd>
      <dt>Metadata</dt><dd><${JSONView} value=${session.metadata} /></dd>
    </dl>
    <${ProblemBox} error=${error} />
    <${PendingCalls} sessionId=${id} items=${pending} onChange=${refresh} />
    ${latest ? html`<${Controls} sessionId=${id} status=${latest.status} onChange=${refresh} />` : null}
    <section aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      <div class="table-wrap"><table data-testid="runs-table">
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Output</th></tr></thead>
        <tbody>
          ${runs && runs.items.length === 0 ? html`<tr><td colspan="4" class="muted">No runs yet.</td></tr>` : null}
          ${(runs ? runs.items : []).map((r) => html`<tr data-testid="run-row" data-run-id=${r.run_id}>
            <td><a href=${'/ui/runs/' + enc(r.run_id)} onClick=${linkClick}><code>${r.run_id}</code></a></td>
            <td><${StatusBadge} status=${r.status} /></td>
            <td>${formatTime(r.created_at)}</td>
            <td class="clip">${r.output || ''}</td>
          </tr>`)}
        </tbody>
      </table></div>
      <div class="pager">
        <button class="secondary" disabled=${at === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Previous</button>
        <button class="secondary" disabled=${!runs || !runs.next_cursor} onClick=${() => setCursors([...cursors, runs.next_cursor])}>Next</button>
      </div>
    </section>
    <section aria-labelledby="mcp-h">
      <h2 id="mcp-h">Pinned MCP tools</h2>
      ${session.mcp_tools.length === 0 ? html`<p class="muted">None (the agent has no MCP servers).</p>` : html`<ul class="plain">
        ${session.mcp_tools.map((t) => html`<li><code>${t.name}</code> <span class="muted">${t.server} · ${t.transport}</span> — ${t.description}</li>`)}
      </ul>`}
    </section>
    <section class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run</h2>
      <${StartRunForm} sessionId=${id} />
    </section>
  </section>`;
}
