import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import {
  BUNDLE_MEDIA_TYPE,
  HxdError,
  createClient,
  downloadExport,
  streamRunEvents,
  type EventPage,
  type HxdClient,
  type MCPTool,
  type RunEvent,
  type RunResult,
  type RunTimeline,
  type TextDeltaEvent,
} from "../src/index.js";
import { startHxd, type Hxd } from "./server.js";

const OUTPUT = "Overdue balance: $1,500. (synthetic fixture)";

let hxd: Hxd;
let client: HxdClient;
let run: RunResult;

async function collect(it: AsyncIterable<RunEvent>): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

async function verify(bundle: Blob) {
  const { data, error } = await client.POST("/bundles/verify", {
    // the contract types the binary body as a string; send the bytes as they are
    body: bundle as unknown as string,
    bodySerializer: (b: unknown) => b as Blob,
    headers: { "content-type": BUNDLE_MEDIA_TYPE },
  });
  assert.equal(error, undefined);
  return data!;
}

before(async () => {
  hxd = await startHxd();
  client = createClient({ baseUrl: hxd.baseUrl });
});

after(async () => {
  await hxd?.stop();
});

describe("hxd TypeScript client against a real hxd", () => {
  test("creates a recorded session and runs it to completion", async () => {
    const s = await client.POST("/sessions", {
      body: { agent: { name: "invoice-analyst", version: "v1" }, recording: true, metadata: { suite: "ts" } },
    });
    assert.equal(s.response.status, 201);
    assert.ok(s.data);
    assert.equal(s.data.recording, true);
    assert.equal(s.data.latest_run, null);

    const r = await client.POST("/sessions/{session_id}/runs", {
      params: { path: { session_id: s.data.session_id }, query: { wait: 20 } },
      body: { message: "Analyze overdue invoices for the demo account" },
    });
    assert.ok(r.data, JSON.stringify(r.error));
    assert.equal(r.data.status, "completed");
    assert.equal(r.data.output, OUTPUT);
    run = r.data;

    const g = await client.GET("/runs/{run_id}", { params: { path: { run_id: run.run_id } } });
    assert.equal(g.data?.output, OUTPUT);
  });

  test("reads the run's timeline: a model lane first, then a lane per tool, with their attempts", async () => {
    const t = await client.GET("/runs/{run_id}/timeline", { params: { path: { run_id: run.run_id } } });
    assert.ok(t.data, JSON.stringify(t.error));
    const tl: RunTimeline = t.data;
    assert.equal(tl.run_id, run.run_id);
    assert.equal(tl.status, "completed");
    assert.equal(tl.lanes[0]?.id, "model");
    assert.ok(tl.lanes.some((l) => l.kind === "tool"));
    assert.ok(tl.attempts.some((a) => a.kind === "model" && a.outcome === "succeeded"));
    assert.ok(tl.attempts.some((a) => a.kind === "tool" && a.lane === `tool:${a.tool}`));
    assert.ok(tl.marks.some((m) => m.type === "completed"));
  });

  test("shows the mcp-demo agent's MCP server and a session's pinned mcp_tools, and runs its MCP tool", async () => {
    const a = await client.GET("/agents/{name}/{version}", { params: { path: { name: "mcp-demo", version: "v1" } } });
    assert.ok(a.data, JSON.stringify(a.error));
    assert.deepEqual(
      a.data.mcp_servers?.map((s) => [s.name, s.transport, s.permission, s.replay_policy]),
      [["demo", "stdio", "allow", "safe"]],
    );
    const s = await client.POST("/sessions", { body: { agent: { name: "mcp-demo", version: "v1" } } });
    assert.equal(s.response.status, 201, JSON.stringify(s.error));
    const tools: MCPTool[] = s.data!.mcp_tools;
    assert.deepEqual(tools.map((t) => t.name).sort(), ["demo_upper", "demo_word_count"]);
    assert.ok(tools.every((t) => t.server === "demo" && t.transport === "stdio"));
    const r = await client.POST("/sessions/{session_id}/runs", {
      params: { path: { session_id: s.data!.session_id }, query: { wait: 20 } },
      body: { message: "Shout it" },
    });
    assert.ok(r.data, JSON.stringify(r.error));
    assert.equal(r.data.status, "completed");
    assert.equal(r.data.output, "The MCP server answered: HELLO FROM AN MCP SERVER");
  });

  test("streams the run's events until run_result, and resumes after a Last-Event-ID", async () => {
    const events = await collect(streamRunEvents(client, run.run_id));
    assert.ok(events.length >= 3, `only ${events.length} events`);
    const last = events.at(-1)!;
    assert.equal(last.type, "run_result");
    assert.equal(last.data.output, OUTPUT); // data narrowed to the run's result by type
    const cursors = events.map((e) => BigInt(e.cursor));
    for (let i = 1; i < cursors.length; i++) assert.ok(cursors[i]! > cursors[i - 1]!, "cursors ascend");

    const mid = events[Math.floor(events.length / 2)]!;
    const later = await collect(streamRunEvents(hxd.baseUrl, run.run_id, { lastEventId: mid.cursor }));
    assert.deepEqual(
      later.map((e) => e.cursor),
      events.filter((e) => BigInt(e.cursor) > BigInt(mid.cursor)).map((e) => e.cursor),
    );
    assert.equal(later.at(-1)?.type, "run_result");
  });

  test("a run submitted with stream: true yields its text as typed text_delta pieces", async () => {
    const s = await client.POST("/sessions", { body: { agent: { name: "stream-demo", version: "v1" } } });
    assert.ok(s.data, JSON.stringify(s.error));
    const r = await client.POST("/sessions/{session_id}/runs", {
      params: { path: { session_id: s.data.session_id }, query: { wait: 20 } },
      body: { message: "Say something", stream: true },
    });
    assert.ok(r.data, JSON.stringify(r.error));
    assert.equal(r.data.status, "completed");
    const events = await collect(streamRunEvents(client, r.data.run_id));
    const deltas: TextDeltaEvent[] = [];
    for (const ev of events) {
      if (ev.type === "text_delta") deltas.push(ev); // narrowed by type: data is a string
    }
    assert.ok(deltas.length > 1, `the answer came in ${deltas.length} piece(s)`);
    assert.equal(deltas.map((d) => d.data).join(""), r.data.output);
    const result = events.findIndex((e) => e.type === "run_result");
    const lastDelta = events.map((e) => e.type).lastIndexOf("text_delta");
    assert.ok(lastDelta < result, "pieces come before run_result");
  });

  test("a typed call reads the events as a JSON page, typed per event", async () => {
    const accepts: (string | null)[] = [];
    const recording = createClient({
      baseUrl: hxd.baseUrl,
      fetch: (req: Request) => {
        accepts.push(req.headers.get("accept"));
        return fetch(req);
      },
    });
    const { data, error, response } = await recording.GET("/runs/{run_id}/events", {
      params: { path: { run_id: run.run_id } },
    });
    assert.equal(error, undefined);
    assert.deepEqual(accepts, ["application/json"]);
    assert.equal(response.headers.get("content-type"), "application/json");
    const page: EventPage = data; // typed as the JSON page, not `string | EventPage`
    const streamed = await collect(streamRunEvents(client, run.run_id));
    assert.deepEqual(page.events, streamed, "the page holds the events the stream sends");
    assert.equal(page.next_cursor, streamed.at(-1)!.cursor);

    // Narrowing on type types data per event.
    const seen = new Set<string>();
    for (const ev of page.events) {
      seen.add(ev.type);
      switch (ev.type) {
        case "text_complete":
          assert.equal(ev.data, OUTPUT);
          break;
        case "tool_call_start":
          assert.equal(ev.data.name, "overdue_balance");
          break;
        case "tool_result":
          assert.equal(ev.data.is_error, false);
          break;
        case "waiting":
          assert.equal(ev.data.on, "model");
          assert.ok(ev.data.seconds >= 0);
          break;
        case "attempt_reset":
          assert.equal(ev.data.attempt, 1);
          break;
        case "run_result":
          assert.equal(ev.data.status, "completed");
          assert.deepEqual(ev.data.pending, []);
          break;
      }
    }
    for (const t of ["waiting", "attempt_reset", "tool_call_start", "tool_result", "text_complete", "run_result"]) {
      assert.ok(seen.has(t), `no ${t} event in ${[...seen]}`);
    }

    // An explicit Accept still wins.
    const sse = await client.GET("/runs/{run_id}/events", {
      params: { path: { run_id: run.run_id } },
      headers: { accept: "text/event-stream" },
      parseAs: "text",
    });
    assert.equal(sse.response.headers.get("content-type"), "text/event-stream");
    assert.match(sse.data!, /^id: /);
  });

  test("resumes a dropped stream with Last-Event-ID without repeating events", async () => {
    const seen: (string | null)[] = [];
    let calls = 0;
    // The first connection is cut after its second frame.
    const flaky = async (req: Request): Promise<Response> => {
      seen.push(req.headers.get("last-event-id"));
      const res = await fetch(req);
      if (calls++ > 0 || !res.body) return res;
      const reader = res.body.getReader();
      let frames = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(ctl) {
          if (frames >= 2) {
            await reader.cancel();
            ctl.error(new TypeError("connection reset (simulated)"));
            return;
          }
          const { value, done } = await reader.read();
          if (done) return ctl.close();
          // the demo's frames are small; count frame ends in this chunk and cut at the second
          const text = new TextDecoder().decode(value);
          const parts = text.split("\n\n");
          if (parts.length - 1 >= 2 - frames) {
            const keep = parts.slice(0, 2 - frames).join("\n\n") + "\n\n";
            frames = 2;
            ctl.enqueue(new TextEncoder().encode(keep));
          } else {
            frames += parts.length - 1;
            ctl.enqueue(value);
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const flakyClient = createClient({ baseUrl: hxd.baseUrl, fetch: flaky });
    const all = await collect(streamRunEvents(client, run.run_id));
    const got = await collect(streamRunEvents(flakyClient, run.run_id, { reconnectDelayMs: 10 }));
    assert.equal(calls, 2, "one reconnect");
    assert.equal(seen[0], null);
    assert.equal(seen[1], all[1]!.cursor, "resumed after the second event");
    assert.deepEqual(got.map((e) => e.cursor), all.map((e) => e.cursor));
  });

  test("a stream dropped after an earlier run_result is resumed", async () => {
    // A run that stopped (awaiting input), then was resumed: its first
    // run_result is not its last event. The first connection breaks after
    // the second frame; the second one finishes the run.
    const frame = (cursor: number, type: string) =>
      `id: ${cursor}\nevent: ${type}\ndata: ${JSON.stringify({ cursor: String(cursor), type, event_id: `e${cursor}` })}\n\n`;
    const seen: (string | null)[] = [];
    const fake = async (req: Request): Promise<Response> => {
      seen.push(req.headers.get("last-event-id"));
      const enc = new TextEncoder();
      const body =
        seen.length === 1
          ? new ReadableStream<Uint8Array>({
              start(ctl) {
                ctl.enqueue(enc.encode(frame(1, "run_result") + frame(2, "tool_call_start")));
              },
              pull(ctl) {
                ctl.error(new TypeError("connection reset (simulated)"));
              },
            })
          : new ReadableStream<Uint8Array>({
              start(ctl) {
                ctl.enqueue(enc.encode(frame(3, "run_result")));
                ctl.close();
              },
            });
      return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
    };
    const fakeClient = createClient({ baseUrl: "http://127.0.0.1:9", fetch: fake });
    const got = await collect(streamRunEvents(fakeClient, "r1", { reconnectDelayMs: 1 }));
    assert.deepEqual(got.map((e) => e.cursor), ["1", "2", "3"]);
    assert.deepEqual(seen, [null, "2"]);
  });

  test("breaking out of the stream closes the connection", async () => {
    let cancelled = false;
    const fake = async (): Promise<Response> => {
      const enc = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        start(ctl) {
          ctl.enqueue(enc.encode(`id: 1\nevent: text_delta\ndata: {"cursor":"1","type":"text_delta"}\n\n`));
        },
        cancel() {
          cancelled = true;
        },
      });
      return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
    };
    const fakeClient = createClient({ baseUrl: "http://127.0.0.1:9", fetch: fake });
    for await (const ev of streamRunEvents(fakeClient, "r1")) {
      assert.equal(ev.cursor, "1");
      break;
    }
    assert.equal(cancelled, true, "the response body was cancelled");
  });

  test("exports with payloads and the bundle verifies valid and complete", async () => {
    const blob = await downloadExport(client, run.run_id, { include_payloads: true });
    assert.ok(blob.size > 0);
    const head = new Uint8Array(await blob.slice(0, 2).arrayBuffer());
    assert.deepEqual([...head], [0x50, 0x4b], "a ZIP archive");
    const report = await verify(blob);
    assert.equal(report.valid, true, JSON.stringify(report));
    assert.equal(report.complete, true, JSON.stringify(report));
    assert.ok(report.record_count > 0);

    const file = path.join(hxd.dir, "run.hx");
    const n = await downloadExport(client, run.run_id, { include_payloads: true }, { toFile: file });
    const st = await stat(file);
    assert.equal(st.size, n);
    assert.equal(st.mode & 0o777, 0o600);
    const again = await verify(new Blob([await readFile(file)]));
    assert.equal(again.valid, true);
    await assert.rejects(downloadExport(client, run.run_id, {}, { toFile: file }), { code: "EEXIST" });
  });

  test("a problem+json error surfaces typed", async () => {
    const { data, error, response } = await client.GET("/runs/{run_id}", {
      params: { path: { run_id: "no-such-run" } },
    });
    assert.equal(data, undefined);
    assert.equal(response.status, 404);
    assert.equal(response.headers.get("content-type"), "application/problem+json");
    assert.equal(error?.code, "not_found");
    assert.equal(error?.status, 404);
    assert.ok(error?.request_id);

    await assert.rejects(collect(streamRunEvents(client, "no-such-run")), (err: unknown) => {
      assert.ok(err instanceof HxdError);
      assert.equal(err.status, 404);
      assert.equal(err.code, "not_found");
      return true;
    });
    await assert.rejects(downloadExport(client, "no-such-run"), { name: "HxdError", code: "not_found" });
  });

  test("a tool awaiting approval is listed, approved and the run completes", async () => {
    const s = await client.POST("/sessions", { body: { agent: { name: "approval-demo", version: "v1" } } });
    assert.ok(s.data, JSON.stringify(s.error));
    const sid = s.data.session_id;
    const r = await client.POST("/sessions/{session_id}/runs", {
      params: { path: { session_id: sid }, query: { wait: 20 } },
      body: { message: "echo, please" },
    });
    assert.equal(r.data?.status, "awaiting_input", JSON.stringify(r.data ?? r.error));

    const p = await client.GET("/sessions/{session_id}/pending", { params: { path: { session_id: sid } } });
    assert.equal(p.data?.items.length, 1);
    const pending = p.data!.items[0]!;
    assert.equal(pending.status, "approval");
    assert.equal(pending.call.name, "echo");

    const a = await client.POST("/sessions/{session_id}/tools/{execution_key}/approve", {
      params: { path: { session_id: sid, execution_key: pending.execution_key } },
      body: { allow: true, resume: true },
    });
    assert.ok(a.data, JSON.stringify(a.error));
    assert.equal(a.data.status, "completed");
    assert.equal(a.data.output, "Done after approval.");

    const events = await collect(streamRunEvents(client, a.data.run_id));
    assert.ok(events.some((e) => e.type === "approval_required"));
    assert.equal(events.at(-1)?.type, "run_result");
  });
});
