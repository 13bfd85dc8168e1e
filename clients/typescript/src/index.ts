// @hxd/client: a typed client for hxd. The types (./schema.ts) are generated
// from api/openapi.yaml by openapi-typescript (`npm run generate`); requests go
// through openapi-fetch. The few helpers below cover what a generated client
// cannot: the bearer token, the SSE event stream and binary exports.
import createFetchClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
export type Schemas = components["schemas"];
export type Session = Schemas["Session"];
/** An MCP tool pinned with a session (`Session.mcp_tools`). */
export type MCPTool = Schemas["MCPTool"];
/** An agent's MCP server as the API shows it (`Agent.mcp_servers`). */
export type AgentMCPServer = Schemas["AgentMCPServer"];
export type RunResult = Schemas["RunResult"];
/** A run's event: a union discriminated by `type`, so narrowing on `type` types `data`. */
export type RunEvent = Schemas["RunEvent"];
/** A piece of the model's text: streamed as it arrives for a run submitted with `stream: true`. */
export type TextDeltaEvent = Schemas["TextDeltaEvent"];
/** A piece of the model's reasoning, streamed like {@link TextDeltaEvent}. */
export type ThinkingDeltaEvent = Schemas["ThinkingDeltaEvent"];
/** The run's token usage, summed over its model attempts. */
export type Usage = Schemas["Usage"];
export type EventPage = Schemas["EventPage"];
export type Problem = Schemas["Problem"];
export type ExportPolicy = Schemas["ExportPolicy"];
export type VerificationReport = Schemas["VerificationReport"];
/** A bundle's signature verdict (`valid`, `invalid`, `absent`, `unknown_key`), in a {@link VerificationReport}. */
export type SignatureReport = Schemas["SignatureReport"];
/** The JWKS of GET /.well-known/hxd-bundle-keys: the Ed25519 keys that verify a server's bundles. */
export type BundleKeySet = Schemas["BundleKeySet"];
/** A run's timeline (GET /runs/{run_id}/timeline): lanes, model and tool attempts, marks. */
export type RunTimeline = Schemas["RunTimeline"];
/** A lane of a {@link RunTimeline}: `model`, or `tool:<name>`. */
export type TimelineLane = Schemas["TimelineLane"];
/** One model or tool attempt of a {@link RunTimeline}: a bar from `started_at` to `ended_at`. */
export type TimelineAttempt = Schemas["TimelineAttempt"];
/** The approval a tool attempt needed. */
export type TimelineApproval = Schemas["TimelineApproval"];
/** Something that happened to a run as a whole (pause, cancel, approval…) at one instant. */
export type TimelineMark = Schemas["TimelineMark"];

/** The media type of a `.hx` bundle (POST /runs/{id}/export, /bundles/*). */
export const BUNDLE_MEDIA_TYPE = "application/vnd.harnessx.incident+zip";

/**
 * The media types typed calls receive: JSON and problem+json. An operation
 * with a JSON form and another one (GET /runs/{run_id}/events: a JSON page
 * or an SSE stream) is typed by its JSON form, which the client asks for.
 */
export type JsonMedia = `${string}/json` | `${string}/${string}+json`;

/** An openapi-fetch client typed by the contract, plus the options it was made with. */
export type HxdClient = Client<paths, JsonMedia> & { readonly hxd: HxdClientInfo };

interface HxdClientInfo {
  baseUrl: string;
  headers: Record<string, string>;
  fetch: (input: Request) => Promise<Response>;
}

export interface CreateClientOptions extends Omit<ClientOptions, "baseUrl"> {
  /** hxd's base URL, e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  /** An access token (JWT) for `hxd serve --auth=oidc`; sent as `Authorization: Bearer`. */
  token?: string;
}

/**
 * createClient returns an openapi-fetch client for hxd: `client.GET("/runs/{run_id}", …)`
 * and friends, fully typed. Each call resolves to `{data}` or `{error}`, where
 * `error` is the typed problem+json body (`code`, `status`, `request_id`, …).
 *
 * Typed calls send `Accept: application/json` unless the options or the call
 * set another Accept, so GET /runs/{run_id}/events answers its JSON page
 * `{events, next_cursor}`; {@link streamRunEvents} reads the SSE form.
 */
export function createClient(opts: CreateClientOptions): HxdClient {
  const { token, baseUrl, headers: extra, fetch: customFetch, ...rest } = opts;
  const headers: Record<string, string> = {};
  new Headers(extra as HeadersInit | undefined).forEach((v, k) => {
    headers[k] = v;
  });
  if (token) headers["authorization"] = `Bearer ${token}`;
  const base = baseUrl.replace(/\/+$/, "");
  const fetchImpl = customFetch ?? ((req: Request) => globalThis.fetch(req));
  const client = createFetchClient<paths, JsonMedia>({
    ...rest,
    baseUrl: base,
    headers: { accept: "application/json", ...headers },
    fetch: customFetch,
  });
  return Object.assign(client, { hxd: { baseUrl: base, headers, fetch: fetchImpl } });
}

/** HxdError is thrown by the helpers below for a problem+json (or other non-2xx) answer. */
export class HxdError extends Error {
  readonly status: number;
  readonly problem: Problem | undefined;
  constructor(status: number, problem: Problem | undefined, message?: string) {
    super(message ?? (problem ? `${problem.code}: ${problem.detail ?? problem.title}` : `HTTP ${status}`));
    this.name = "HxdError";
    this.status = status;
    this.problem = problem;
  }
  /** The problem's stable machine code (e.g. `not_found`), when the body was a problem. */
  get code(): string | undefined {
    return this.problem?.code;
  }
}

async function errorFrom(res: Response): Promise<HxdError> {
  const text = await res.text().catch(() => "");
  let problem: Problem | undefined;
  try {
    const parsed = JSON.parse(text) as Problem;
    if (parsed && typeof parsed.code === "string") problem = parsed;
  } catch {
    // not JSON
  }
  return new HxdError(res.status, problem);
}

function infoOf(target: HxdClient | string): HxdClientInfo {
  if (typeof target === "string") {
    return { baseUrl: target.replace(/\/+$/, ""), headers: {}, fetch: (req) => globalThis.fetch(req) };
  }
  return target.hxd;
}

export interface StreamRunEventsOptions {
  /** Resume after this cursor (sent as `Last-Event-ID`); default: from the start. */
  lastEventId?: string;
  /** Aborts the stream (the iterator then throws the abort reason). */
  signal?: AbortSignal;
  /** How often to reconnect after a dropped connection before giving up (default 5). */
  maxReconnects?: number;
  /** Delay before a reconnect in ms (default 500). */
  reconnectDelayMs?: number;
}

interface SseFrame {
  id?: string;
  event?: string;
  data: string;
}

/** Parses SSE frames out of a byte stream (comments and retry fields are skipped). */
async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buf = "";
  let frame: SseFrame = { data: "" };
  let hasData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const sep = buf[nl] === "\r" && buf[nl + 1] === "\n" ? 2 : 1;
        if (buf[nl] === "\r" && nl + 1 === buf.length) break; // a CRLF may be split
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + sep);
        if (line === "") {
          if (hasData) yield frame;
          frame = { data: "" };
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") {
          frame.data = hasData ? `${frame.data}\n${val}` : val;
          hasData = true;
        } else if (field === "id") {
          if (!val.includes("\0")) frame.id = val;
        } else if (field === "event") {
          frame.event = val;
        }
      }
    }
  } finally {
    // Also when the consumer stops early: cancelling closes the connection.
    await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

/**
 * streamRunEvents iterates over a run's events from the SSE form of
 * GET /runs/{run_id}/events. A dropped connection is resumed with
 * `Last-Event-ID` (the last cursor seen), so no event is repeated or lost.
 * The iteration ends when the server closes the stream after `run_result`
 * (a run that is no longer running); a stream that closes without a
 * `run_result`, or breaks, is reconnected, up to `maxReconnects` times in a
 * row (a run paused or awaiting input that is resumed has a `run_result`
 * before its later events). Breaking out of the loop closes the connection.
 */
export async function* streamRunEvents(
  target: HxdClient | string,
  runId: string,
  opts: StreamRunEventsOptions = {},
): AsyncGenerator<RunEvent, void, undefined> {
  const info = infoOf(target);
  const url = `${info.baseUrl}/runs/${encodeURIComponent(runId)}/events`;
  const maxReconnects = opts.maxReconnects ?? 5;
  const delay = opts.reconnectDelayMs ?? 500;
  let lastId = opts.lastEventId;
  let failures = 0;
  let lastWasResult = false;
  for (;;) {
    const headers: Record<string, string> = { ...info.headers, accept: "text/event-stream" };
    if (lastId !== undefined) headers["last-event-id"] = lastId;
    let res: Response;
    try {
      res = await info.fetch(new Request(url, { headers, signal: opts.signal }));
    } catch (err) {
      if (opts.signal?.aborted || ++failures > maxReconnects) throw err;
      await sleep(delay, opts.signal);
      continue;
    }
    if (!res.ok || !res.body) throw await errorFrom(res);
    let progressed = false;
    let dropped = false;
    try {
      for await (const frame of sseFrames(res.body)) {
        const ev = JSON.parse(frame.data) as RunEvent;
        lastId = frame.id ?? ev.cursor;
        progressed = true;
        lastWasResult = ev.type === "run_result";
        yield ev;
      }
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      if (err instanceof SyntaxError) throw err;
      dropped = true; // a dropped connection: resume after the last cursor
    }
    if (!dropped && lastWasResult) return;
    failures = progressed ? 0 : failures + 1;
    if (failures > maxReconnects) {
      throw new HxdError(0, undefined, `event stream of run ${runId} closed without run_result`);
    }
    if (!progressed) await sleep(delay, opts.signal);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export interface DownloadExportOptions {
  /** Node only: write the bundle to this path (created 0600, never overwritten). */
  toFile?: string;
  signal?: AbortSignal;
}

/**
 * downloadExport exports a recorded run as a `.hx` bundle
 * (POST /runs/{run_id}/export with `policy`). Without `toFile` it resolves
 * to a Blob; with `toFile` (Node) it writes the file with mode 0600, refusing
 * to overwrite one, and resolves to the number of bytes written. A refusal
 * (404, 403, 422 …) throws an HxdError carrying the problem.
 */
export async function downloadExport(
  client: HxdClient,
  runId: string,
  policy?: ExportPolicy,
  opts?: { signal?: AbortSignal },
): Promise<Blob>;
export async function downloadExport(
  client: HxdClient,
  runId: string,
  policy: ExportPolicy | undefined,
  opts: DownloadExportOptions & { toFile: string },
): Promise<number>;
export async function downloadExport(
  client: HxdClient,
  runId: string,
  policy: ExportPolicy = {},
  opts: DownloadExportOptions = {},
): Promise<Blob | number> {
  const info = client.hxd;
  const res = await info.fetch(
    new Request(`${info.baseUrl}/runs/${encodeURIComponent(runId)}/export`, {
      method: "POST",
      headers: { ...info.headers, "content-type": "application/json", accept: `${BUNDLE_MEDIA_TYPE}, application/problem+json` },
      body: JSON.stringify(policy),
      signal: opts.signal,
    }),
  );
  if (!res.ok) throw await errorFrom(res);
  if (opts.toFile === undefined) return await res.blob();
  if (!res.body) throw new HxdError(res.status, undefined, "export answered without a body");
  const { open, unlink } = await import("node:fs/promises");
  const fh = await open(opts.toFile, "wx", 0o600);
  let n = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      await fh.write(chunk);
      n += chunk.byteLength;
    }
    await fh.sync();
    await fh.close();
  } catch (err) {
    await fh.close().catch(() => {});
    await unlink(opts.toFile).catch(() => {});
    throw err;
  }
  return n;
}
