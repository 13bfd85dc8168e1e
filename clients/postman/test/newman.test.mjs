// Runs the committed Postman collection with newman against a real
// `hxd serve --demo` (HXD_BIN, or built from ./cmd/hxd) on a free
// 127.0.0.1 port with a temporary SQLite file, and checks every answer
// against the contract: a status the operation lists (its `default`
// answer does not count), never a 5xx, and problem+json on every error.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import yaml from "js-yaml";
import newman from "newman";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "../../..");
const collectionPath = path.resolve(here, "../hxd.postman_collection.json");

let dir;
let hxd;
let baseUrl;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "hxd-postman-"));
  let bin = process.env.HXD_BIN;
  if (!bin) {
    bin = path.join(dir, "hxd");
    await promisify(execFile)(process.env.HXD_GO || "go", ["build", "-o", bin, "./cmd/hxd"], { cwd: repoRoot });
  }
  hxd = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--db", path.join(dir, "hxd.db"), "--demo", "--workdir", dir], {
    cwd: dir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  baseUrl = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hxd did not start in 30s:\n${log}`)), 30_000);
    hxd.stderr.setEncoding("utf8");
    hxd.stderr.on("data", (chunk) => {
      log += chunk;
      const m = /hxd listening.*?addr=(http:\/\/[0-9.]+:[0-9]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    hxd.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`hxd exited with ${code}:\n${log}`));
    });
  });
});

after(async () => {
  if (hxd && hxd.exitCode === null && hxd.signalCode === null) {
    const exited = new Promise((resolve) => hxd.once("exit", resolve));
    hxd.kill("SIGTERM");
    const t = setTimeout(() => hxd.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(t);
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

// The contract's operations: "METHOD /path/{param}" → the statuses it lists.
async function contractOperations() {
  const spec = yaml.load(await readFile(path.join(repoRoot, "api/openapi.yaml"), "utf8"));
  const ops = new Map();
  for (const [p, item] of Object.entries(spec.paths)) {
    for (const method of ["get", "put", "post", "delete", "options", "head", "patch", "trace"]) {
      const op = item[method];
      if (!op) continue;
      const codes = Object.keys(op.responses).filter((c) => c !== "default").map(Number);
      ops.set(`${method.toUpperCase()} ${p}`, { id: op.operationId, codes });
    }
  }
  return ops;
}

// "METHOD /path/{param}" of a collection request (Postman writes :param).
function operationOf(item) {
  const segs = item.request.url.path.map((s) => (s.startsWith(":") ? `{${s.slice(1)}}` : s));
  return `${item.request.method} /${segs.join("/")}`;
}

function runNewman(options) {
  return new Promise((resolve, reject) => {
    newman.run(options, (err, summary) => (err ? reject(err) : resolve(summary)));
  });
}

test("the Postman collection runs against hxd with documented statuses and problem+json errors", async () => {
  const ops = await contractOperations();
  const collection = JSON.parse(await readFile(collectionPath, "utf8"));

  // One folder per tag, one request per operation.
  const spec = yaml.load(await readFile(path.join(repoRoot, "api/openapi.yaml"), "utf8"));
  assert.deepEqual(
    collection.item.map((f) => f.name),
    spec.tags.map((t) => t.name),
  );
  const requests = collection.item.flatMap((f) => f.item);
  assert.deepEqual(requests.map(operationOf).sort(), [...ops.keys()].sort());
  assert.deepEqual(
    collection.variable.map((v) => v.key),
    ["baseUrl", "bearerToken"],
  );

  const summary = await runNewman({
    collection,
    envVar: [{ key: "baseUrl", value: baseUrl }],
    reporters: [],
    timeoutRequest: 60_000,
  });
  const executions = summary.run.executions;
  assert.equal(executions.length, requests.length, "every request ran once");

  const problems = [];
  const seen = [];
  for (const ex of executions) {
    const key = operationOf(ex.item);
    const op = ops.get(key);
    if (ex.requestError || !ex.response) {
      problems.push(`${key}: no answer (${ex.requestError?.message})`);
      continue;
    }
    const code = ex.response.code;
    const type = ex.response.headers.get("Content-Type") ?? "";
    const body = ex.response.stream ? ex.response.stream.toString("utf8") : "";
    seen.push(`${op.id} ${code}`);
    if (code >= 500) problems.push(`${key}: ${code} ${body}`);
    if (!op.codes.includes(code)) problems.push(`${key} (${op.id}): ${code} is not documented (${op.codes}): ${body}`);
    if (code >= 400) {
      if (type !== "application/problem+json") {
        problems.push(`${key}: ${code} answered ${type}, not application/problem+json`);
        continue;
      }
      let p;
      try {
        p = JSON.parse(body);
      } catch {
        problems.push(`${key}: ${code} problem is not JSON: ${body}`);
        continue;
      }
      if (p.status !== code || typeof p.code !== "string" || typeof p.request_id !== "string") {
        problems.push(`${key}: ${code} is not a problem: ${body}`);
      }
    }
  }
  assert.deepEqual(problems, [], `answers:\n${seen.join("\n")}`);
  // The collection's examples reach hxd's handlers, not only its router:
  // the session of the examples is created and runs.
  assert.ok(seen.includes("createSession 201"), seen.join("\n"));
  assert.ok(seen.some((s) => /^submitRun 20[02]$/.test(s)), seen.join("\n"));
});
