// Unit tests of api.js's event stream reader: SSE frames split across
// reads, the bearer-free request it makes without auth, and the
// Last-Event-ID it sends when the run page resumes a dropped stream.
// Run with `npm test` in ui/ (node --test).
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';

import { parseFrames, ProblemError, streamEvents } from '../src/api.js';

const realFetch = globalThis.fetch;
afterEach(() => { globalThis.fetch = realFetch; });

// sseResponse answers chunks as an event stream, one read each.
function sseResponse(chunks) {
  const enc = new TextEncoder();
  const body = new ReadableStream({
    start(ctl) {
      for (const c of chunks) ctl.enqueue(enc.encode(c));
      ctl.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

const frame = (cursor, type, data) =>
  `id: ${cursor}\nevent: ${type}\ndata: ${JSON.stringify({ type, data, run_id: 'r1', step_id: '1', attempt_id: '1', cursor })}\n\n`;

test('parseFrames keeps an unfinished frame for the next read', () => {
  const { frames, rest } = parseFrames('id: 1\r\ndata: {"a":1}\r\n\r\n: keep-alive\n\nid: 2\ndata: {"a"');
  assert.equal(frames.length, 1);
  assert.equal(frames[0].id, '1');
  assert.deepEqual(frames[0].data, ['{"a":1}']);
  assert.equal(rest, 'id: 2\ndata: {"a"');
});

test('streamEvents yields events split across reads, in order', async () => {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, init });
    const all = frame('1', 'text_delta', 'Hel') + ': keep-alive\n\n' + frame('2', 'text_delta', 'lo');
    return sseResponse([all.slice(0, 30), all.slice(30, 95), all.slice(95)]);
  };
  const got = [];
  for await (const ev of streamEvents('r 1')) got.push([ev.cursor, ev.data]);
  assert.deepEqual(got, [['1', 'Hel'], ['2', 'lo']]);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].url, '/runs/r%201/events');
  assert.equal(calls[0].init.headers.Accept, 'text/event-stream');
  assert.equal(calls[0].init.headers['Last-Event-ID'], undefined);
  assert.equal(calls[0].init.headers.Authorization, undefined);
});

test('streamEvents resumes after lastEventId with Last-Event-ID', async () => {
  let sent;
  globalThis.fetch = async (_url, init) => {
    sent = init.headers['Last-Event-ID'];
    return sseResponse([frame('8', 'run_result', { status: 'completed' })]);
  };
  const got = [];
  for await (const ev of streamEvents('r1', { lastEventId: '7' })) got.push(ev.cursor);
  assert.equal(sent, '7');
  assert.deepEqual(got, ['8']);
});

test('streamEvents throws the problem of a refused stream', async () => {
  globalThis.fetch = async () => new Response(JSON.stringify({ title: 'Not Found', status: 404, code: 'not_found', detail: 'no run r1' }), {
    status: 404, headers: { 'Content-Type': 'application/problem+json' },
  });
  await assert.rejects(async () => {
    for await (const _ of streamEvents('r1')) { /* none */ }
  }, (e) => e instanceof ProblemError && e.status === 404 && e.code === 'not_found' && e.detail === 'no run r1');
});
