// Builds the console into internal/ui/dist (index.html, app.js, app.css),
// which internal/ui embeds. The output is deterministic: identical sources
// give identical bytes (no timestamps, no content hashes, no source maps),
// so `make verify` can tell a stale build from a fresh one.
import { build } from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'internal', 'ui', 'dist');

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: { app: join(here, 'src', 'main.js'), 'app-style': join(here, 'src', 'app.css') },
  outdir: out,
  bundle: true,
  format: 'esm',
  target: ['es2020'],
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
});
// esbuild names a CSS entry after its entry point; the page links app.css.
const css = await readFile(join(out, 'app-style.css'));
await rm(join(out, 'app-style.css'));
await writeFile(join(out, 'app.css'), css);
await writeFile(join(out, 'index.html'), await readFile(join(here, 'src', 'index.html')));
