// Starts a real hxd for the tests: builds ./cmd/hxd once (HXD_BIN skips the
// build), serves it on 127.0.0.1:0 with the demo agents plus the agents of
// test/agents, and parses the listening address from its log on stderr.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url)); // clients/typescript/dist/test
export const repoRoot = path.resolve(here, "../../../..");

export interface Hxd {
  baseUrl: string;
  dir: string;
  stop(): Promise<void>;
}

// An agent whose tool needs approval (permission: ask), for the approve flow.
const approvalAgent = `name: approval-demo
version: v1
system_prompt: You echo after approval.
model:
  provider: scripted
  script:
    - tool_calls:
        - id: call_1
          name: echo
          input: {text: approved}
    - text: "Done after approval."
tools:
  - name: echo
    description: Return the given text unchanged.
    kind: builtin
    input_schema:
      type: object
      properties:
        text: {type: string}
      required: [text]
    replay_policy: safe
    permission: ask
`;

// An agent without response middleware, so a run submitted with
// `stream: true` streams its answer piece by piece.
const streamAgent = `name: stream-demo
version: v1
system_prompt: You answer in a few words.
model:
  provider: scripted
  script:
    - text: "Streamed answers arrive piece by piece."
`;

export async function startHxd(): Promise<Hxd> {
  const dir = await mkdtemp(path.join(tmpdir(), "hxd-ts-"));
  let bin = process.env["HXD_BIN"];
  if (!bin) {
    bin = path.join(dir, "hxd");
    await promisify(execFile)(process.env["HXD_GO"] || "go", ["build", "-o", bin, "./cmd/hxd"], { cwd: repoRoot });
  }
  const agents = path.join(dir, "agents");
  await mkdir(agents);
  await writeFile(path.join(agents, "approval-demo.yaml"), approvalAgent);
  await writeFile(path.join(agents, "stream-demo.yaml"), streamAgent);
  const child = spawn(
    bin,
    ["serve", "--addr", "127.0.0.1:0", "--db", path.join(dir, "hxd.db"), "--demo", "--agents", agents, "--workdir", dir],
    { cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hxd did not start in 30s:\n${log}`)), 30_000);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => {
      log += chunk;
      const m = /hxd listening.*?addr=(http:\/\/[0-9.]+:[0-9]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`hxd exited with ${code}:\n${log}`));
    });
  });
  return {
    baseUrl,
    dir,
    async stop() {
      await kill(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(t);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
