// The package as a user gets it: `npm pack` (which runs `prepare`, the
// build) of a copy of the sources, the tarball installed into a fresh ESM
// Node project, a TypeScript file type-checked with the tsconfig the README
// shows, and run against a real hxd.
//
// The install is `npm ci --offline` with the lockfile `npm install <tarball>`
// writes: the tarball plus the client's runtime dependencies as this
// package's lockfile pins them, whose tarballs the `npm ci` of this package
// put into the npm cache. So it needs no network (a plain `npm install
// <tarball>` would fetch the dependencies' registry metadata).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { repoRoot, startHxd, type Hxd } from "./server.js";

const run = promisify(execFile);
const pkgDir = path.join(repoRoot, "clients/typescript");
const tsc = path.join(pkgDir, "node_modules/typescript/bin/tsc");

let hxd: Hxd;
let dir: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "hxd-ts-pkg-"));
  hxd = await startHxd();
});

after(async () => {
  await hxd?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// The consumer: typed calls, GET /runs/{run_id}/events as a JSON page, and
// a RunEvent narrowed on type. The @ts-expect-error lines fail the
// type-check if data were untyped (any).
const main = (baseUrl: string) => `import { createClient, type RunEvent } from "@hxd/client";

const hxd = createClient({ baseUrl: ${JSON.stringify(baseUrl)} });

const s = await hxd.POST("/sessions", {
  body: { agent: { name: "invoice-analyst", version: "v1" } },
});
if (s.error) throw new Error(s.error.code);
const r = await hxd.POST("/sessions/{session_id}/runs", {
  params: { path: { session_id: s.data.session_id }, query: { wait: 20 } },
  body: { message: "Analyze overdue invoices for the demo account" },
});
if (r.error) throw new Error(r.error.code);

const { data: page, error } = await hxd.GET("/runs/{run_id}/events", {
  params: { path: { run_id: r.data.run_id } },
});
if (error) throw new Error(\`\${error.code}: \${error.detail ?? error.title}\`);

function describe(ev: RunEvent): string {
  switch (ev.type) {
    case "tool_call_start":
      return \`tool_call_start \${ev.data.name}\`;
    case "text_complete": {
      // @ts-expect-error: a text event's data is a string
      const n: number = ev.data;
      void n;
      return \`text_complete \${ev.data.length}\`;
    }
    case "run_result":
      return \`run_result \${ev.data.status} \${ev.data.output}\`;
    default:
      return ev.type;
  }
}

// @ts-expect-error: without narrowing, data has no status
void page.events[0]?.data.status;

console.log(JSON.stringify({ next: page.next_cursor, events: page.events.map(describe) }));
`;

test("npm pack, install into a fresh ESM project, type-check and run against hxd", async () => {
  // A copy of the package's sources, so that pack's prepare builds from
  // them and not from this checkout's dist/.
  const src = path.join(dir, "src");
  await mkdir(src);
  for (const f of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json"]) {
    await cp(path.join(pkgDir, f), path.join(src, f));
  }
  await cp(path.join(pkgDir, "src"), path.join(src, "src"), { recursive: true });
  await symlink(path.join(pkgDir, "node_modules"), path.join(src, "node_modules"), "dir");
  const packed = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: src });
  const [info] = JSON.parse(packed.stdout) as {
    name: string;
    version: string;
    filename: string;
    integrity: string;
    files: { path: string }[];
  }[];
  assert.ok(info, packed.stdout);
  const files = info.files.map((f) => f.path).sort();
  assert.ok(files.includes("dist/src/index.js") && files.includes("dist/src/index.d.ts"), files.join(" "));
  assert.deepEqual(
    files.filter((f) => !f.startsWith("dist/src/")),
    ["package.json"],
    "only the built package is packed",
  );

  const app = path.join(dir, "app");
  await mkdir(app);
  const spec = `file:../${info.filename}`;
  await writeFile(
    path.join(app, "package.json"),
    JSON.stringify({ name: "app", private: true, type: "module", dependencies: { [info.name]: spec } }),
  );
  type LockEntry = { dev?: boolean; devOptional?: boolean; dependencies?: Record<string, string> };
  const lock = JSON.parse(await readFile(path.join(pkgDir, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const packages: Record<string, unknown> = {
    "": { name: "app", dependencies: { [info.name]: spec } },
    [`node_modules/${info.name}`]: {
      version: info.version,
      resolved: spec,
      integrity: info.integrity,
      dependencies: lock.packages[""]!.dependencies,
    },
  };
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (key !== "" && !entry.dev && !entry.devOptional) packages[key] = entry;
  }
  await writeFile(
    path.join(app, "package-lock.json"),
    JSON.stringify({ name: "app", lockfileVersion: 3, requires: true, packages }),
  );
  await run("npm", ["ci", "--offline", "--no-audit", "--no-fund"], { cwd: app });
  assert.ok((await readdir(path.join(app, "node_modules/@hxd/client/dist/src"))).includes("index.js"));

  // The tsconfig the README shows, no @types/node: the client's types
  // need only the DOM's fetch types.
  await writeFile(
    path.join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "es2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        lib: ["es2022", "dom"],
        types: [],
        strict: true,
      },
      include: ["main.ts"],
    }),
  );
  await writeFile(path.join(app, "main.ts"), main(hxd.baseUrl));
  await run(process.execPath, [tsc, "-p", app]).catch((err: { stdout?: string; message: string }) => {
    assert.fail(`type-check failed:\n${err.stdout ?? err.message}`);
  });

  const out = await run(process.execPath, [path.join(app, "main.js")], { cwd: app });
  const got = JSON.parse(out.stdout) as { next: string; events: string[] };
  assert.ok(got.events.includes("tool_call_start overdue_balance"), out.stdout);
  assert.equal(got.events.at(-1), "run_result completed Overdue balance: $1,500. (synthetic fixture)");
  assert.match(got.next, /^[0-9]+$/);
});
