// The sessions page: the caller's sessions (filtered and paged on the
// server), a form to create one, and starting a run in it.
import { useEffect, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api } from '../api.js';
import { ProblemBox, RUN_STATUSES, StatusBadge, agentLabel } from '../common.js';
import { formatTime } from '../timeline.js';
import { linkClick, navigate } from '../router.js';
import { StartRunForm } from './session.js';

const PAGE = 20;

// filtersFromURL reads ?status= and ?agent= (the listing's filters live in
// the URL, so a filtered listing is a link).
function filtersFromURL() {
  const q = new URLSearchParams(location.search);
  return { status: q.get('status') || '', agent: q.get('agent') || '' };
}

function setFiltersInURL(f) {
  const q = new URLSearchParams();
  if (f.status) q.set('status', f.status);
  if (f.agent) q.set('agent', f.agent);
  const s = q.toString();
  navigate('/ui/' + (s ? '?' + s : ''), { replace: true });
}

function useAgents() {
  const [agents, setAgents] = useState([]);
  useEffect(() => {
    api('GET', '/agents').then((r) => setAgents(r.items || []), () => setAgents([]));
  }, []);
  return agents;
}

function NewSession({ agents, onCreated }) {
  const [agent, setAgent] = useState('');
  const [sessionId, setSessionId] = useState('');
  const [recording, setRecording] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const a = agents.find((x) => agentLabel(x) === (agent || agentLabel(agents[0])));
    if (!a) return;
    setBusy(true);
    setError(null);
    try {
      const body = { agent: { name: a.name, version: a.version }, recording };
      if (sessionId.trim()) body.session_id = sessionId.trim();
      const s = await api('POST', '/sessions', { body });
      setSessionId('');
      onCreated(s);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="card new-session" data-testid="new-session" onSubmit=${submit} aria-labelledby="new-h">
    <h2 id="new-h">New session</h2>
    <div class="row">
      <label>Agent
        <select data-testid="new-session-agent" value=${agent || agentLabel(agents[0])} onChange=${(e) => setAgent(e.target.value)}>
          ${agents.map((a) => html`<option value=${agentLabel(a)}>${agentLabel(a)}</option>`)}
        </select>
      </label>
      <label>Session id (optional)
        <input data-testid="new-session-id" value=${sessionId} maxlength="200" onInput=${(e) => setSessionId(e.target.value)} placeholder="generated" />
      </label>
      <label class="check"><input type="checkbox" checked=${recording} onChange=${(e) => setRecording(e.target.checked)} /> Record (flight recorder)</label>
      <button type="submit" data-testid="new-session-submit" disabled=${busy || agents.length === 0}>Create session</button>
    </div>
    <${ProblemBox} error=${error} />
  </form>`;
}

export function SessionsPage() {
  const agents = useAgents();
  const [filters, setFilters] = useState(filtersFromURL);
  // cursors[i] is the cursor of page i (page 0: none).
  const [cursors, setCursors] = useState(['']);
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  const [created, setCreated] = useState(null);
  const [reload, setReload] = useState(0);
  const at = cursors.length - 1;

  useEffect(() => {
    const ctl = new AbortController();
    setError(null);
    api('GET', '/sessions', { query: { limit: PAGE, cursor: cursors[at], status: filters.status, agent: filters.agent }, signal: ctl.signal })
      .then(setPage, (e) => { if (e.name !== 'AbortError') { setError(e); setPage({ items: [], next_cursor: null }); } });
    return () => ctl.abort();
  }, [filters, cursors, reload]);

  const change = (k) => (e) => {
    const f = { ...filters, [k]: e.target.value };
    setFilters(f);
    setCursors(['']);
    setFiltersInURL(f);
  };
  const agentNames = [...new Set(agents.map((a) => a.name))];

  return html`<section class="sessions">
    <h1>Sessions</h1>
    <${NewSession} agents=${agents} onCreated=${(s) => { setCreated(s); setReload((n) => n + 1); }} />
    ${created ? html`<div class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run in <a href=${'/ui/sessions/' + encodeURIComponent(created.session_id)} onClick=${linkClick}>${created.session_id}</a></h2>
      <${StartRunForm} sessionId=${created.session_id} />
    </div>` : null}
    <form class="filters" role="search" aria-label="Filter sessions" onSubmit=${(e) => e.preventDefault()}>
      <label>Status
        <select data-testid="filter-status" value=${filters.status} onChange=${change('status')}>
          <option value="">any</option>
          ${RUN_STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
          <option value="none">no run yet</option>
        </select>
      </label>
      <label>Agent
        <select data-testid="filter-agent" value=${filters.agent} onChange=${change('agent')}>
          <option value="">any</option>
          ${agentNames.map((n) => html`<option value=${n}>${n} (all versions)</option>`)}
          ${agents.map((a) => html`<option value=${agentLabel(a)}>${agentLabel(a)}</option>`)}
        </select>
      </label>
    </form>
    <${ProblemBox} error=${error} />
    <div class="table-wrap">
      <table data-testid="sessions-table">
        <caption class="sr-only">Your sessions</caption>
        <thead><tr><th scope="col">Session</th><th scope="col">Agent</th><th scope="col">Latest run</th><th scope="col">Created</th></tr></thead>
        <tbody>
          ${page && page.items.length === 0 ? html`<tr><td colspan="4" class="muted">No sessions${filters.status || filters.agent ? ' match these filters' : ''}.</td></tr>` : null}
          ${(page ? page.items : []).map((s) => html`<tr data-testid="session-row" data-session-id=${s.session_id}>
            <td><a href=${'/ui/sessions/' + encodeURIComponent(s.session_id)} onClick=${linkClick}>${s.session_id}</a></td>
            <td>${agentLabel(s.agent)}</td>
            <td>${s.latest_run ? html`<a href=${'/ui/runs/' + encodeURIComponent(s.latest_run.run_id)} onClick=${linkClick}><${StatusBadge} status=${s.latest_run.status} /></a>` : html`<${StatusBadge} />`}</td>
            <td>${formatTime(s.created_at)}</td>
          </tr>`)}
        </tbody>
      </table>
    </div>
    <div class="pager">
      <button class="secondary" data-testid="prev-page" disabled=${at === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Previous</button>
      <span class="muted">Page ${at + 1}</span>
      <button class="secondary" data-testid="next-page" disabled=${!page || !page.next_cursor}
        onClick=${() => setCursors([...cursors, page.next_cursor])}>Next</button>
    </div>
  </section>`;
}
