// records.js: the run timeline of a played-back `.hx` bundle, rebuilt from
// its journal records (REFERENCE §2.4) in the RunTimeline shape of
// GET /runs/{run_id}/timeline, so that the inspector draws it with the
// same Timeline component as a live run. Pure functions, no DOM, no I/O:
// unit-tested with node --test (ui/test/records.test.js).

const MODEL_LANE = 'model';

// Kinds whose records belong to a model attempt (step_id, attempt_id).
const MODEL_KINDS = new Set([
  'model.started', 'model.response', 'model.processed', 'model.completed',
  'model.failed', 'model.interrupted',
]);

// Run statuses after which nothing runs any more.
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

// Checkpoint statuses that are a mark when the run enters them.
const STATUS_MARKS = new Set(['paused', 'cancelled', 'failed', 'completed']);

function time(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? 0 : t;
}

function attemptNumber(id) {
  const n = Number.parseInt(id, 10);
  return Number.isFinite(n) && n >= 1 ? n : 1;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// present is a record's payload when it was exported (capture present),
// else an empty object: redacted and omitted payloads say nothing.
function present(r) {
  return r.capture === 'present' && isObject(r.payload) ? r.payload : {};
}

function errorOf(p) {
  if (typeof p.type !== 'string' && typeof p.message !== 'string') return undefined;
  return { type: String(p.type ?? ''), message: String(p.message ?? '') };
}

/**
 * timelineFromRecords rebuilds a RunTimeline from a bundle's journal
 * records (in sequence order, as POST /bundles/playback returns them) and
 * its manifest.
 *
 * Model attempts are (step_id, attempt_id) from model.started to
 * model.completed (succeeded), model.failed (failed, or retrying when
 * another attempt of the step follows) or model.interrupted (cancelled);
 * an attempt_reset event (each new attempt of a step) is a mark, and
 * makes an attempt still open (lost with its process) reset. Tool attempts
 * are (execution_key, attempt_id) from tool.started to tool.returned
 * (succeeded), tool.failed (failed/retrying, or uncertain when the outcome
 * is unknown) or tool.interrupted; tool.resolved settles an uncertain one
 * (result: succeeded, abort: aborted; its resolution says which) or
 * decides an approval requested by
 * an approval_required event (a declined call is a declined attempt that
 * never started). A waiting event gives the preceding failed attempt of
 * its lane its retry wait. Marks come from approval and recovery events,
 * tool.resolved, attempt_reset, run.resumed and the statuses checkpoints
 * enter. Times are the records' recorded_at.
 *
 * Redacted or omitted payloads leave out what only they tell (model
 * names, tool names fall back to the execution key's call id).
 */
export function timelineFromRecords(records, manifest = {}) {
  const recs = Array.isArray(records) ? records.filter(isObject) : [];
  const m = isObject(manifest) ? manifest : {};
  const lanes = [{ id: MODEL_LANE, kind: 'model' }];
  const laneIds = new Set([MODEL_LANE]);
  const attempts = [];
  const marks = [];
  const model = new Map(); // "step\u0000attempt" → attempt
  const tools = new Map(); // "key\u0000attempt" → attempt
  const calls = new Map(); // execution key → {tool, call_id, step_id, replay_policy}
  const approvals = new Map(); // execution key → approval waiting for tool.started or a decline
  const lastFailed = { model: null, tool: null };
  let status = null;

  const toolLane = (name) => {
    const id = `tool:${name}`;
    if (!laneIds.has(id)) {
      laneIds.add(id);
      lanes.push({ id, kind: 'tool', tool: name });
    }
    return id;
  };
  const callOf = (key, call) => {
    let c = calls.get(key);
    if (!c) {
      const id = key.split(':').pop();
      c = { tool: null, call_id: id };
      calls.set(key, c);
    }
    if (isObject(call)) {
      if (typeof call.name === 'string' && call.name) c.tool = call.name;
      if (typeof call.id === 'string' && call.id) c.call_id = call.id;
    }
    return c;
  };
  const openTool = (r, key, n, at) => {
    const c = callOf(key);
    const a = {
      lane: toolLane(c.tool ?? c.call_id), kind: 'tool', step_id: r.step_id, attempt: n,
      started_at: at, outcome: 'running', tool: c.tool ?? undefined, call_id: c.call_id,
      execution_key: key,
    };
    if (c.replay_policy) a.replay_policy = c.replay_policy;
    attempts.push(a);
    tools.set(`${key}\u0000${n}`, a);
    return a;
  };
  const latestTool = (key) => {
    let found = null;
    for (const a of attempts) if (a.kind === 'tool' && a.execution_key === key) found = a;
    return found;
  };
  const close = (a, at, outcome, error) => {
    a.ended_at = at;
    a.outcome = outcome;
    if (error) a.error = error;
  };

  for (const r of recs) {
    const at = r.recorded_at;
    const p = present(r);
    const key = typeof r.execution_key === 'string' ? r.execution_key : '';
    const n = attemptNumber(r.attempt_id);
    switch (r.kind) {
      case 'model.started': {
        // A new attempt of the step: the failed one before it was retried.
        for (const a of model.values()) {
          if (a.step_id === r.step_id && a.outcome === 'failed') a.outcome = 'retrying';
        }
        const a = { lane: MODEL_LANE, kind: 'model', step_id: r.step_id, attempt: n, started_at: at, outcome: 'running' };
        if (typeof p.model === 'string' && p.model) a.model = p.model;
        if (typeof p.provider === 'string' && p.provider) a.provider = p.provider;
        attempts.push(a);
        model.set(`${r.step_id}\u0000${n}`, a);
        break;
      }
      case 'model.completed':
      case 'model.failed':
      case 'model.interrupted': {
        let a = model.get(`${r.step_id}\u0000${n}`);
        if (!a) { // a failed compaction call has no model.started
          a = { lane: MODEL_LANE, kind: 'model', step_id: r.step_id, attempt: n, started_at: at, outcome: 'running' };
          attempts.push(a);
          model.set(`${r.step_id}\u0000${n}`, a);
        }
        if (r.kind === 'model.completed') close(a, at, 'succeeded');
        else if (r.kind === 'model.failed') {
          close(a, at, 'failed', errorOf(p));
          lastFailed.model = a;
        } else close(a, at, 'cancelled');
        break;
      }
      case 'tool.started': {
        if (!key) break;
        const c = callOf(key, p.call);
        if (typeof p.replay_policy === 'string') c.replay_policy = p.replay_policy;
        // The failed attempt before it was retried.
        const prev = latestTool(key);
        if (prev && prev.outcome === 'failed') prev.outcome = 'retrying';
        const a = openTool(r, key, n, at);
        const ap = approvals.get(key);
        if (ap) {
          a.approval = stripStep(ap);
          approvals.delete(key);
        }
        break;
      }
      case 'tool.dispatched':
        if (key) callOf(key, p.call);
        break;
      case 'tool.returned': {
        const a = tools.get(`${key}\u0000${n}`) ?? (key ? openTool(r, key, n, at) : null);
        if (a) close(a, at, p.is_error === true ? 'failed' : 'succeeded',
          p.is_error === true ? { type: 'tool_error', message: 'the tool returned an error result' } : undefined);
        break;
      }
      case 'tool.failed': {
        const a = tools.get(`${key}\u0000${n}`) ?? (key ? openTool(r, key, n, at) : null);
        if (!a) break;
        if (p.outcome === 'unknown') close(a, at, 'uncertain', errorOf(p));
        else {
          close(a, at, 'failed', errorOf(p));
          lastFailed.tool = a;
        }
        break;
      }
      case 'tool.interrupted': {
        const a = tools.get(`${key}\u0000${n}`) ?? (key ? openTool(r, key, n, at) : null);
        if (a) close(a, at, p.status === 'uncertain' ? 'uncertain' : 'cancelled');
        break;
      }
      case 'tool.resolved': {
        if (!key) break;
        const ap = approvals.get(key);
        if (ap && !ap.decided_at) {
          ap.decided_at = at;
          if (typeof p.allow === 'boolean') ap.approved = p.allow;
          const declined = p.allow === false;
          marks.push(mark(declined ? 'approval_declined' : 'approval_given', at, r.step_id, key));
          if (declined) {
            const c = callOf(key);
            const a = {
              lane: toolLane(c.tool ?? c.call_id), kind: 'tool', step_id: ap.step_id ?? r.step_id, attempt: n,
              started_at: ap.requested_at, ended_at: at, outcome: 'declined', tool: c.tool ?? undefined,
              call_id: c.call_id, execution_key: key, approval: stripStep(ap),
            };
            attempts.push(a);
            approvals.delete(key);
          }
          break;
        }
        const how = resolution(p);
        marks.push(mark('resolved', at, r.step_id, key, how));
        const a = latestTool(key);
        if (a && how) {
          a.resolution = how;
          if (how === 'abort') close(a, a.ended_at ?? at, 'aborted');
          else if (how === 'result') close(a, a.ended_at ?? at, 'succeeded');
          else if (a.outcome === 'running') close(a, a.ended_at ?? at, 'uncertain');
        }
        break;
      }
      case 'event': {
        const type = p.type;
        const data = isObject(p.data) ? p.data : {};
        const evKey = typeof data.execution_key === 'string' ? data.execution_key : '';
        if (type === 'approval_required' && evKey) {
          callOf(evKey, data.call);
          approvals.set(evKey, { requested_at: at, step_id: r.step_id });
          toolLane(callOf(evKey).tool ?? callOf(evKey).call_id);
          marks.push(mark('approval_required', at, r.step_id, evKey));
        } else if (type === 'attempt_reset') {
          const reset = attemptNumber(String(data.attempt ?? ''));
          const step = typeof p.step_id === 'string' ? p.step_id : r.step_id;
          // Every new model attempt of a step says so (a mark, as the API
          // gives); only one left open (its process lost mid-call) was
          // abandoned.
          const a = model.get(`${step}\u0000${reset}`);
          if (a && a.outcome === 'running') close(a, at, 'reset');
          marks.push(mark('attempt_reset', at, step, undefined, String(reset)));
        } else if (type === 'waiting') {
          const lane = data.on === 'tool' ? 'tool' : 'model';
          const a = lastFailed[lane];
          if (a && typeof data.seconds === 'number') a.retry_wait_seconds = data.seconds;
        }
        break;
      }
      case 'run.resumed':
        marks.push(mark('resumed', at, undefined, undefined,
          typeof p.previous_status === 'string' ? `after ${p.previous_status}` : undefined));
        break;
      case 'checkpoint': {
        const s = p.status;
        if (typeof s === 'string' && s !== status) {
          if (STATUS_MARKS.has(s)) marks.push(mark(s, at, undefined, undefined, s === 'failed' ? errorText(p.error) : undefined));
          status = s;
        }
        break;
      }
      default:
    }
  }

  // Approvals still awaited at export.
  for (const [key, ap] of approvals) {
    const c = callOf(key);
    attempts.push({
      lane: toolLane(c.tool ?? c.call_id), kind: 'tool', step_id: ap.step_id ?? '0', attempt: 1,
      started_at: ap.requested_at, outcome: 'awaiting_approval', tool: c.tool ?? undefined,
      call_id: c.call_id, execution_key: key, approval: stripStep(ap),
    });
  }
  // A cancelled run ended what was still running or awaiting approval.
  const runStatus = typeof m.status === 'string' ? m.status : (status ?? 'running');
  const last = recs.length ? recs[recs.length - 1].recorded_at : undefined;
  if (runStatus === 'cancelled') {
    for (const a of attempts) if (a.outcome === 'running' || a.outcome === 'awaiting_approval') close(a, last, 'cancelled');
  }
  for (const a of attempts) {
    if (a.tool === undefined) delete a.tool;
    if (a.ended_at === undefined) delete a.ended_at;
  }

  const laneOrder = new Map(lanes.map((l, i) => [l.id, i]));
  const order = new Map(attempts.map((a, i) => [a, i]));
  attempts.sort((a, b) => time(a.started_at) - time(b.started_at)
    || laneOrder.get(a.lane) - laneOrder.get(b.lane) || order.get(a) - order.get(b));
  const markOrder = new Map(marks.map((x, i) => [x, i]));
  marks.sort((a, b) => time(a.at) - time(b.at) || markOrder.get(a) - markOrder.get(b));

  return {
    run_id: String(m.run_id ?? recs[0]?.run_id ?? ''),
    session_id: String(m.session_id ?? recs[0]?.session_id ?? ''),
    status: runStatus,
    created_at: recs[0]?.recorded_at ?? m.created_at,
    updated_at: last ?? m.created_at,
    lanes,
    attempts,
    marks,
  };
}

function stripStep(ap) {
  const out = { requested_at: ap.requested_at };
  if (ap.decided_at) out.decided_at = ap.decided_at;
  if (typeof ap.approved === 'boolean') out.approved = ap.approved;
  return out;
}

function mark(type, at, stepId, key, detail) {
  const x = { type, at };
  if (stepId !== undefined) x.step_id = stepId;
  if (key) x.execution_key = key;
  if (detail) x.detail = detail;
  return x;
}

function resolution(p) {
  if (p.abort === true) return 'abort';
  if (p.retry === true) return 'retry';
  if (p.result !== undefined && p.result !== null) return 'result';
  return undefined;
}

function errorText(e) {
  if (typeof e === 'string') return e;
  if (isObject(e) && typeof e.message === 'string') return e.message;
  return undefined;
}

/**
 * recordsOfAttempt lists the records of one timeline attempt, in sequence
 * order: for a model attempt the model.* records of its step and attempt
 * number and the events the run emitted in that attempt (but those of
 * tool calls); for a tool attempt the tool.* records of its execution key
 * and attempt number (all of them for a call declined or awaiting
 * approval, and the tool.resolved that approved it), and the events of
 * its call: its approval request and its tool_call_* and tool_result
 * events of that attempt.
 */
export function recordsOfAttempt(records, attempt) {
  if (!Array.isArray(records) || !isObject(attempt)) return [];
  const n = String(attempt.attempt);
  if (attempt.kind === 'model') {
    return records.filter((r) => {
      if (!isObject(r)) return false;
      if (MODEL_KINDS.has(r.kind)) return r.step_id === attempt.step_id && r.attempt_id === n;
      if (r.kind !== 'event') return false;
      const ev = eventInfo(r);
      return !ev.key && !ev.callId && ev.step === attempt.step_id && ev.attempt === n;
    });
  }
  const key = attempt.execution_key;
  const whole = attempt.outcome === 'declined' || attempt.outcome === 'awaiting_approval';
  const decided = attempt.approval?.decided_at;
  return records.filter((r) => {
    if (!isObject(r) || !key) return false;
    if (typeof r.kind === 'string' && r.kind.startsWith('tool.')) {
      return r.execution_key === key
        && (whole || r.attempt_id === n || (r.kind === 'tool.resolved' && decided !== undefined && r.recorded_at === decided));
    }
    if (r.kind !== 'event') return false;
    const ev = eventInfo(r);
    if (ev.key) return ev.key === key && (ev.type !== 'recovery_required' || ev.attempt === n || whole);
    return ev.callId !== '' && ev.callId === attempt.call_id && ev.step === attempt.step_id && ev.attempt === n;
  });
}

// Events of a tool call name it by call id.
const CALL_EVENTS = new Set(['tool_call_start', 'tool_call_complete', 'tool_result']);

// eventInfo is what an event record says of its place: its own step and
// attempt (the record's are the run's at commit), and the call it is of.
function eventInfo(r) {
  const p = present(r);
  const d = isObject(p.data) ? p.data : {};
  let callId = '';
  if (CALL_EVENTS.has(p.type)) callId = String(d.id ?? d.tool_call_id ?? '');
  return {
    type: p.type,
    step: typeof p.step_id === 'string' ? p.step_id : r.step_id,
    attempt: typeof p.attempt_id === 'string' ? p.attempt_id : r.attempt_id,
    key: typeof d.execution_key === 'string' ? d.execution_key : '',
    callId,
  };
}
