// Unit tests of records.js on bundles exported by hxd (ui/test/testdata):
//   invoice.hx  — `hxd demo flight-recorder`: the invoice-analyst run, an
//                 injected model failure, its retry, the overdue_balance tool;
//   approval.hx — a run of two calls needing approval (a approved, b
//                 declined) resumed to completion, exported over the API;
//   spill.hx    — a tool result spilled into an artifact, exported with it.
// Run with `npm test` in ui/ (node --test).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { recordsOfAttempt, timelineFromRecords } from '../src/records.js';

// readBundle reads the members of a STORED zip (as hxd writes them) by its
// central directory: enough for these fixtures, no dependency.
function readBundle(name) {
  const buf = readFileSync(new URL(`./testdata/${name}`, import.meta.url));
  const eocd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  assert.ok(eocd >= 0, 'end of central directory');
  const count = buf.readUInt16LE(eocd + 10);
  let off = buf.readUInt32LE(eocd + 16);
  const members = {};
  for (let i = 0; i < count; i++) {
    assert.equal(buf.readUInt32LE(off), 0x02014b50);
    const method = buf.readUInt16LE(off + 10);
    const size = buf.readUInt32LE(off + 20);
    const nameLen = buf.readUInt16LE(off + 28);
    const extraLen = buf.readUInt16LE(off + 30);
    const commentLen = buf.readUInt16LE(off + 32);
    const local = buf.readUInt32LE(off + 42);
    const member = buf.toString('utf8', off + 46, off + 46 + nameLen);
    assert.equal(method, 0, `${member} is STORED`);
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    members[member] = buf.subarray(start, start + size);
    off += 46 + nameLen + extraLen + commentLen;
  }
  const records = members['records.jsonl'].toString('utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  return { manifest: JSON.parse(members['manifest.json'].toString('utf8')), records };
}

const summary = (tl) => tl.attempts.map((a) => `${a.lane}/${a.step_id}/${a.attempt}/${a.outcome}`);

test('invoice run: the failed model attempt, its retry, the tool and the answer', () => {
  const { manifest, records } = readBundle('invoice.hx');
  const tl = timelineFromRecords(records, manifest);
  assert.equal(tl.run_id, manifest.run_id);
  assert.equal(tl.session_id, manifest.session_id);
  assert.equal(tl.status, 'completed');
  assert.equal(tl.created_at, records[0].recorded_at);
  assert.equal(tl.updated_at, records.at(-1).recorded_at);
  assert.deepEqual(tl.lanes, [
    { id: 'model', kind: 'model' },
    { id: 'tool:overdue_balance', kind: 'tool', tool: 'overdue_balance' },
  ]);
  assert.deepEqual(summary(tl), [
    'model/1/1/retrying', 'model/1/2/succeeded', 'tool:overdue_balance/1/1/succeeded', 'model/2/1/succeeded',
  ]);
  const [failed, retry, tool] = tl.attempts;
  const byKind = (kind, step, attempt) => records.find((r) => r.kind === kind && r.step_id === step && r.attempt_id === attempt);
  assert.equal(failed.started_at, byKind('model.started', '1', '1').recorded_at);
  assert.equal(failed.ended_at, byKind('model.failed', '1', '1').recorded_at);
  assert.deepEqual(failed.error, { type: 'ConnectionError', message: 'Injected model connection failure' });
  const waiting = records.find((r) => r.kind === 'event' && r.payload.type === 'waiting');
  assert.equal(failed.retry_wait_seconds, waiting.payload.data.seconds);
  assert.ok(failed.retry_wait_seconds > 0);
  assert.equal(failed.model, undefined, 'the scripted provider names no model');
  assert.equal(retry.ended_at, byKind('model.completed', '1', '2').recorded_at);
  assert.equal(retry.error, undefined);
  assert.equal(tool.kind, 'tool');
  assert.equal(tool.tool, 'overdue_balance');
  assert.equal(tool.call_id, 'overdue');
  assert.equal(tool.execution_key, `${manifest.run_id}:1:overdue`);
  assert.equal(tool.replay_policy, 'safe');
  assert.equal(tool.approval, undefined);
  // The attempt_reset event that every retry emits is a mark (as the API
  // gives it), but no reset: the failed attempt had ended.
  assert.deepEqual(tl.marks.map((m) => [m.type, m.detail ?? null]), [['attempt_reset', '1'], ['completed', null]]);
});

test('invoice run: each bar lists its own records', () => {
  const { manifest, records } = readBundle('invoice.hx');
  const tl = timelineFromRecords(records, manifest);
  const kinds = (a) => recordsOfAttempt(records, a).map((r) => (r.kind === 'event' ? `event:${r.payload.type}` : r.kind));
  assert.deepEqual(kinds(tl.attempts[0]), ['model.started', 'model.failed', 'event:waiting', 'event:attempt_reset']);
  assert.deepEqual(kinds(tl.attempts[1]), ['model.started', 'model.response', 'model.processed', 'model.completed']);
  assert.deepEqual(kinds(tl.attempts[2]), [
    'tool.started', 'tool.dispatched', 'event:tool_call_start', 'tool.returned', 'tool.processed',
    'event:tool_call_complete', 'event:tool_result',
  ]);
  assert.deepEqual(kinds(tl.attempts[3]), [
    'model.started', 'model.response', 'model.processed', 'model.completed',
    'event:text_delta', 'event:text_complete', 'event:turn_complete', 'event:run_result',
  ]);
});

test('approval run: approved, declined, resumed', () => {
  const { manifest, records } = readBundle('approval.hx');
  const tl = timelineFromRecords(records, manifest);
  assert.deepEqual(tl.lanes.map((l) => l.id), ['model', 'tool:echo']);
  const keyA = `${manifest.run_id}:1:a`;
  const keyB = `${manifest.run_id}:1:b`;
  const at = (kind, key, extra = () => true) => records.find((r) => r.kind === kind && r.execution_key === key && extra(r)).recorded_at;
  const requested = (key) => records.find((r) => r.kind === 'event' && r.payload.type === 'approval_required'
    && r.payload.data.execution_key === key).recorded_at;
  const [, ...rest] = tl.attempts;
  const declined = tl.attempts.find((a) => a.execution_key === keyB);
  const approved = tl.attempts.find((a) => a.execution_key === keyA);
  assert.deepEqual(declined, {
    lane: 'tool:echo', kind: 'tool', step_id: '1', attempt: 1, started_at: requested(keyB),
    ended_at: at('tool.resolved', keyB), outcome: 'declined', tool: 'echo', call_id: 'b', execution_key: keyB,
    approval: { requested_at: requested(keyB), decided_at: at('tool.resolved', keyB), approved: false },
  });
  assert.equal(approved.outcome, 'succeeded');
  assert.equal(approved.started_at, at('tool.started', keyA));
  assert.equal(approved.ended_at, at('tool.returned', keyA));
  assert.deepEqual(approved.approval, { requested_at: requested(keyA), decided_at: at('tool.resolved', keyA), approved: true });
  assert.deepEqual(summary(tl), [
    'model/1/1/succeeded', 'tool:echo/1/1/declined', 'tool:echo/1/1/succeeded', 'model/2/1/succeeded',
  ]);
  assert.equal(rest.length, 3);
  assert.deepEqual(tl.marks.map((m) => [m.type, m.execution_key ?? null]), [
    ['approval_required', keyA], ['approval_required', keyB], ['approval_given', keyA],
    ['approval_declined', keyB], ['resumed', null], ['completed', null],
  ]);
  assert.equal(tl.marks[4].detail, 'after awaiting_input');
  // The approved call's bar lists its approval and its attempt's records.
  const kinds = recordsOfAttempt(records, approved).map((r) => (r.kind === 'event' ? `event:${r.payload.type}` : r.kind));
  assert.deepEqual(kinds, [
    'event:approval_required', 'tool.resolved', 'tool.started', 'tool.dispatched', 'event:tool_call_start',
    'tool.returned', 'tool.processed', 'event:tool_call_complete', 'event:tool_result',
  ]);
  assert.deepEqual(recordsOfAttempt(records, declined).map((r) => r.kind), ['event', 'tool.resolved']);
});

test('attempts are ordered by start, marks by time; all times are record times', () => {
  for (const name of ['invoice.hx', 'approval.hx', 'spill.hx']) {
    const { manifest, records } = readBundle(name);
    const tl = timelineFromRecords(records, manifest);
    const times = new Set(records.map((r) => r.recorded_at));
    for (const a of tl.attempts) {
      assert.ok(times.has(a.started_at), `${name}: ${a.started_at}`);
      if (a.ended_at) assert.ok(Date.parse(a.ended_at) >= Date.parse(a.started_at), `${name}: ends before it starts`);
      assert.ok(tl.lanes.some((l) => l.id === a.lane));
      assert.ok(Number.isInteger(a.attempt) && a.attempt >= 1);
    }
    const starts = tl.attempts.map((a) => Date.parse(a.started_at));
    assert.deepEqual(starts, [...starts].sort((x, y) => x - y), name);
    const marks = tl.marks.map((m) => Date.parse(m.at));
    assert.deepEqual(marks, [...marks].sort((x, y) => x - y), name);
  }
});

// A record of the shape of REFERENCE §2.1 (exported: with capture).
let seq = 0;
function rec(kind, step, attempt, key, payload, at) {
  seq += 1;
  return {
    version: 1, id: `r${seq}`, seq, kind, session_id: 's', run_id: 'r', step_id: step, attempt_id: attempt,
    execution_key: key, recorded_at: at, capture: payload === null ? 'omitted' : 'present', payload,
  };
}
const ev = (type, data, step, attempt, at) => rec('event', step, attempt, null,
  { type, data, session_id: 's', run_id: 'r', step_id: step, attempt_id: attempt, event_id: `e${seq}`, cursor: String(seq) }, at);
const t = (s) => `2025-01-02T03:04:${String(s).padStart(2, '0')}.000000+00:00`;

test('table: outcomes rebuilt from synthetic records', () => {
  const call = { id: 'c', name: 'charge', input: {} };
  const cases = [
    {
      name: 'a model call lost with its process is reset, its retry succeeds',
      records: [
        rec('model.started', '1', '1', null, { model: 'm' }, t(1)),
        rec('run.resumed', '1', '1', null, { previous_status: 'running' }, t(5)),
        ev('attempt_reset', { attempt: 1 }, '1', '1', t(6)),
        rec('model.started', '1', '2', null, { model: 'm' }, t(6)),
        rec('model.completed', '1', '2', null, {}, t(7)),
      ],
      attempts: ['model/1/1/reset', 'model/1/2/succeeded'],
      marks: ['resumed', 'attempt_reset'],
      check: (tl) => assert.equal(tl.marks[1].detail, '1'),
    },
    {
      name: 'a tool failing transiently is retried after its wait',
      records: [
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'idempotent' }, t(1)),
        rec('tool.failed', '1', '1', 'r:1:c', { type: 'TransientToolError', message: 'busy', outcome: 'failed' }, t(2)),
        ev('waiting', { on: 'tool', seconds: 1.5 }, '1', '1', t(2)),
        rec('tool.started', '1', '2', 'r:1:c', { call, replay_policy: 'idempotent' }, t(4)),
        rec('tool.returned', '1', '2', 'r:1:c', { tool_call_id: 'c', content: 'ok', is_error: false }, t(5)),
      ],
      attempts: ['tool:charge/1/1/retrying', 'tool:charge/1/2/succeeded'],
      check: (tl) => {
        assert.equal(tl.attempts[0].retry_wait_seconds, 1.5);
        assert.deepEqual(tl.attempts[0].error, { type: 'TransientToolError', message: 'busy' });
        assert.equal(tl.attempts[1].replay_policy, 'idempotent');
      },
    },
    {
      name: 'an uncertain call resolved with abort is aborted',
      records: [
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'manual' }, t(1)),
        rec('tool.interrupted', '1', '1', 'r:1:c', { outcome: 'unknown', status: 'uncertain' }, t(2)),
        rec('checkpoint', '1', '1', null, { phase: 'tools', status: 'paused', tools: [] }, t(2)),
        ev('recovery_required', { execution_key: 'r:1:c', call }, '1', '1', t(2)),
        rec('tool.resolved', '1', '1', 'r:1:c', { allow: null, result: null, retry: false, abort: true, status: 'completed' }, t(9)),
      ],
      attempts: ['tool:charge/1/1/aborted'],
      marks: ['paused', 'resolved'],
      check: (tl) => {
        assert.equal(tl.attempts[0].ended_at, t(2));
        assert.equal(tl.attempts[0].resolution, 'abort');
        assert.equal(tl.marks[1].detail, 'abort');
      },
    },
    {
      name: 'an uncertain call resolved with a result succeeded',
      records: [
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'manual' }, t(1)),
        rec('tool.failed', '1', '1', 'r:1:c', { type: 'Timeout', message: 'no answer', outcome: 'unknown' }, t(3)),
        rec('tool.resolved', '1', '1', 'r:1:c', { allow: null, result: { content: 'done' }, retry: false, abort: false, status: 'completed' }, t(9)),
      ],
      attempts: ['tool:charge/1/1/succeeded'],
      marks: ['resolved'],
      check: (tl) => assert.equal(tl.attempts[0].resolution, 'result'),
    },
    {
      name: 'an uncertain call resolved with retry stays uncertain, and its retry follows',
      records: [
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'manual' }, t(1)),
        rec('tool.interrupted', '1', '1', 'r:1:c', { outcome: 'unknown', status: 'uncertain' }, t(2)),
        rec('tool.resolved', '1', '1', 'r:1:c', { allow: null, result: null, retry: true, abort: false, status: 'prepared' }, t(5)),
        rec('tool.started', '1', '2', 'r:1:c', { call, replay_policy: 'manual' }, t(6)),
        rec('tool.returned', '1', '2', 'r:1:c', { tool_call_id: 'c', content: 'ok', is_error: false }, t(7)),
      ],
      attempts: ['tool:charge/1/1/uncertain', 'tool:charge/1/2/succeeded'],
      marks: ['resolved'],
      check: (tl) => assert.equal(tl.attempts[0].resolution, 'retry'),
    },
    {
      name: 'a call still uncertain at export stays uncertain',
      records: [
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'manual' }, t(1)),
        rec('tool.failed', '1', '1', 'r:1:c', { type: 'Timeout', message: 'no answer', outcome: 'unknown' }, t(3)),
      ],
      attempts: ['tool:charge/1/1/uncertain'],
    },
    {
      name: 'an approval still awaited at export',
      records: [
        ev('approval_required', { execution_key: 'r:1:c', call }, '1', '0', t(3)),
      ],
      attempts: ['tool:charge/1/1/awaiting_approval'],
      marks: ['approval_required'],
      check: (tl) => assert.deepEqual(tl.attempts[0].approval, { requested_at: t(3) }),
    },
    {
      name: 'a cancelled run ends what was running',
      manifest: { status: 'cancelled' },
      records: [
        rec('model.started', '1', '1', null, { model: 'm' }, t(1)),
        rec('model.interrupted', '1', '1', null, { outcome: 'incomplete' }, t(2)),
        rec('tool.started', '1', '1', 'r:1:c', { call, replay_policy: 'safe' }, t(3)),
        rec('checkpoint', '1', '1', null, { phase: 'result', status: 'cancelled', tools: [] }, t(4)),
      ],
      attempts: ['model/1/1/cancelled', 'tool:charge/1/1/cancelled'],
      marks: ['cancelled'],
      check: (tl) => assert.equal(tl.attempts[1].ended_at, t(4)),
    },
    {
      name: 'a cancelled run ends an approval still awaited',
      manifest: { status: 'cancelled' },
      records: [
        ev('approval_required', { execution_key: 'r:1:c', call }, '1', '0', t(3)),
        rec('checkpoint', '1', '1', null, { phase: 'result', status: 'cancelled', tools: [] }, t(8)),
      ],
      attempts: ['tool:charge/1/1/cancelled'],
      marks: ['approval_required', 'cancelled'],
      check: (tl) => assert.equal(tl.attempts[0].ended_at, t(8)),
    },
    {
      name: 'a failed run: its last model error, and the failed mark',
      manifest: { status: 'failed' },
      records: [
        rec('model.started', '1', '1', null, { model: 'm' }, t(1)),
        rec('model.failed', '1', '1', null, { type: 'AuthError', message: 'bad key' }, t(2)),
        rec('checkpoint', '1', '1', null, { phase: 'result', status: 'failed', error: { message: 'bad key' }, tools: [] }, t(2)),
      ],
      attempts: ['model/1/1/failed'],
      marks: ['failed'],
      check: (tl) => assert.equal(tl.marks[0].detail, 'bad key'),
    },
    {
      name: 'omitted payloads still give the bars, named by call id',
      records: [
        rec('model.started', '1', '1', null, null, t(1)),
        rec('model.completed', '1', '1', null, null, t(2)),
        rec('tool.started', '1', '1', 'r:1:c', null, t(3)),
        rec('tool.returned', '1', '1', 'r:1:c', null, t(4)),
      ],
      attempts: ['model/1/1/succeeded', 'tool:c/1/1/succeeded'],
    },
    {
      name: 'no records, no attempts',
      records: [],
      attempts: [],
      check: (tl) => assert.deepEqual(tl.lanes, [{ id: 'model', kind: 'model' }]),
    },
  ];
  for (const c of cases) {
    const tl = timelineFromRecords(c.records, { run_id: 'r', session_id: 's', status: 'running', ...c.manifest });
    assert.deepEqual(summary(tl), c.attempts, c.name);
    assert.deepEqual(tl.marks.map((m) => m.type), c.marks ?? [], c.name);
    c.check?.(tl);
  }
});
