#!/usr/bin/env node
// Runs the compiled CLI in dist/. Loading TypeScript at run time cost about a second per start, so the
// code is compiled once (`npm install`, `npm run build`). In a checkout, a src/ file newer than the
// last compile triggers one incremental compile first, so an edit is never silently ignored.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = join(root, 'dist', '.tsbuildinfo');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.name.endsWith('.test.ts')) continue;
    const mtime = entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs;
    if (mtime > newest) newest = mtime;
  }
  return newest;
}

function compile() {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    process.stderr.write('sless: dist/ is missing or older than src/, and TypeScript is not installed: run `npm install`\n');
    process.exit(1);
  }
  process.stderr.write('sless: compiling TypeScript (src/ changed since the last build) ...\n');
  const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write('sless: the TypeScript compile failed (see above)\n');
    process.exit(1);
  }
  // tsc leaves its build info untouched when no output changed; the stamp must still move forward.
  const now = new Date();
  utimesSync(stamp, now, now);
}

// The controller image ships dist/ without src/: nothing to check there.
if (existsSync(join(root, 'src')) && (!existsSync(stamp) || newestMtime(join(root, 'src')) > statSync(stamp).mtimeMs))
  compile();
await import('../dist/cli/index.js');
