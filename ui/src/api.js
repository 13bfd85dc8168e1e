// The console's only way to the server: the public REST API, with the
// caller's bearer token when one is set.
import { getToken, onUnauthorized } from './auth.js';

// ProblemError is a non-2xx answer: the problem+json body's fields (or
// the status text when the body is not a problem).
export class ProblemError extends Error {
  constructor(status, problem) {
    const p = problem || {};
    super(p.detail || p.title || `HTTP ${status}`);
    this.name = 'ProblemError';
    this.status = status;
    this.code = p.code || '';
    this.title = p.title || `HTTP ${status}`;
    this.detail = p.detail || '';
    this.problem = p;
  }
}

function authHeaders(headers = {}) {
  const h = { ...headers };
  const t = getToken();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function problemOf(resp) {
  let p = null;
  const ct = resp.headers.get('Content-Type') || '';
  if (ct.includes('json')) {
    try { p = await resp.json(); } catch { p = null; }
  }
  if (resp.status === 401) onUnauthorized();
  return new ProblemError(resp.status, p || { title: resp.statusText || `HTTP ${resp.status}` });
}

// api calls method path (relative to the server root) with an optional
// JSON body and query parameters (undefined/null/'' values are left out),
// and answers the parsed JSON, or the Response itself with raw.
export async function api(method, path, { body, query, headers, raw, signal } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  const h = authHeaders({ Accept: 'application/json', ...(headers || {}) });
  const init = { method, headers: h, signal };
  if (body !== undefined) {
    h['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  if (!resp.ok) throw await problemOf(resp);
  if (raw) return resp;
  if (resp.status === 204) return null;
  return resp.json();
}

// parseFrames splits SSE text into complete frames, returning them and
// the unfinished rest.
export function parseFrames(buf) {
  const frames = [];
  const text = buf.replace(/\r\n?/g, '\n');
  let start = 0;
  for (;;) {
    const end = text.indexOf('\n\n', start);
    if (end < 0) break;
    const block = text.slice(start, end);
    start = end + 2;
    const f = { id: null, event: 'message', data: [] };
    let any = false;
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'id') f.id = value;
      else if (field === 'event') f.event = value;
      else if (field === 'data') f.data.push(value);
      else continue;
      any = true;
    }
    if (any) frames.push(f);
  }
  return { frames, rest: text.slice(start) };
}

// streamEvents reads the run's event stream with fetch (so the bearer
// token goes along), yielding each RunEvent with its cursor; it resumes
// after lastEventId. It ends when the server ends the stream (the run is
// no longer running); a failed connection throws.
export async function* streamEvents(runId, { lastEventId, signal } = {}) {
  const headers = authHeaders({ Accept: 'text/event-stream' });
  if (lastEventId) headers['Last-Event-ID'] = String(lastEventId);
  const resp = await fetch(`/runs/${encodeURIComponent(runId)}/events`, { headers, signal, cache: 'no-store' });
  if (!resp.ok) throw await problemOf(resp);
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      const { frames, rest } = parseFrames(buf);
      buf = rest;
      for (const f of frames) {
        if (!f.data.length) continue;
        let ev;
        try { ev = JSON.parse(f.data.join('\n')); } catch { continue; }
        if (f.id && !ev.cursor) ev.cursor = f.id;
        yield ev;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
