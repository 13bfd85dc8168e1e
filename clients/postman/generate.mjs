// Generates hxd.postman_collection.json from api/openapi.yaml with
// openapi-to-postmanv2 (pinned in package-lock.json), the options Postman's
// own OpenAPI import needs for what the README promises: one folder per tag
// (folderStrategy=Tags) and requests filled from the contract's examples
// (parametersResolution=Example). `make generate` runs it; `make verify`
// fails when the committed file differs from its output.
//
// The output is deterministic: the converter gives every item and example
// response a random UUID, which is replaced by one derived from the item's
// place in the collection; the conversion runs twice and must give the same
// file. baseUrl is a collection variable (default: `make run`'s address),
// and so is bearerToken (empty: --auth=none needs none).
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import converter from "openapi-to-postmanv2";

const here = path.dirname(fileURLToPath(import.meta.url));
const specPath = path.resolve(here, "../../api/openapi.yaml");
const outPath = path.join(here, "hxd.postman_collection.json");

export const OPTIONS = { folderStrategy: "Tags", parametersResolution: "Example" };
export const BASE_URL = "http://127.0.0.1:8080";

function convert(spec) {
  return new Promise((resolve, reject) => {
    converter.convertV2({ type: "string", data: spec }, OPTIONS, (err, status) => {
      if (err) return reject(err);
      if (!status.result) return reject(new Error(`openapi-to-postmanv2: ${status.reason}`));
      resolve(status.output[0].data);
    });
  });
}

// A UUID (version 8, RFC 9562 custom) from the SHA-256 of key.
function stableId(key) {
  const h = createHash("sha256").update(key).digest("hex").split("");
  h[12] = "8";
  h[16] = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  const s = h.join("");
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20, 32)}`;
}

// Replaces every random id with a stable one, keyed by the names on the
// way to it (folder / request / response and its position).
function stabilize(collection) {
  collection.info._postman_id = stableId(`hxd:${collection.info.name}`);
  const seen = new Set();
  const walk = (items, prefix) => {
    for (const item of items) {
      const key = `${prefix}/${item.name}`;
      if (seen.has(key)) throw new Error(`two items named ${key}: ids would collide`);
      seen.add(key);
      if ("id" in item) item.id = stableId(key);
      if (Array.isArray(item.item)) walk(item.item, key);
      (item.response ?? []).forEach((r, i) => {
        if ("id" in r) r.id = stableId(`${key}#response/${i}/${r.code ?? "default"}/${r.name}`);
      });
    }
  };
  walk(collection.item, "");
  collection.variable = [
    { key: "baseUrl", value: BASE_URL, type: "string", description: "hxd's base URL" },
    {
      key: "bearerToken",
      value: "",
      type: "string",
      description: "An access token (JWT) for hxd serve --auth=oidc; empty with --auth=none",
    },
  ];
  return collection;
}

export async function generate() {
  const spec = await readFile(specPath, "utf8");
  const [a, b] = [stabilize(await convert(spec)), stabilize(await convert(spec))];
  const text = JSON.stringify(a, null, 2) + "\n";
  if (text !== JSON.stringify(b, null, 2) + "\n") {
    throw new Error("openapi-to-postmanv2 gave two different collections for one contract: find what it randomizes");
  }
  return text;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await writeFile(outPath, await generate());
}
