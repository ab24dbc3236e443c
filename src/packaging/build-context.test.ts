/**
 * createBuildContext, the archive a build starts from: byte-for-byte deterministic and sorted without
 * the manifests, its gzip handle closed when done, each runtime's Dockerfile inputs shipped, and a
 * staging directory left by a writer process SIGKILLed mid-write removed by the next writer, while
 * directories of live processes stay.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import { PACKAGE_ROOT } from '../config/config.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { OwnedTempDirs } from '../core/owned-temp-dirs.js';
import { createBuildContext } from './build-context.js';

function snapshot(files: Record<string, { content: string; mode?: string }>): SourceSnapshot {
  const tree: TreeFile[] = Object.entries(files)
    .map(([path, f]) => ({ path, mode: f.mode ?? '100644', oid: path }))
    .sort((a, b) => a.path.localeCompare(b.path));
  return {
    commit: 'c'.repeat(40),
    listFiles: async (dir) => tree.filter((f) => dir === '' || dir === '.' || f.path.startsWith(`${dir}/`)),
    readFile: async (path) => new TextEncoder().encode(files[path]?.content ?? ''),
  };
}

const files = {
  'fn/function.yaml': { content: 'apiVersion: sless.dev/v1alpha1\n' },
  'fn/handler.js': { content: 'exports.handle = () => 1;\n' },
  'fn/lib/b.js': { content: 'module.exports = 2;\n' },
  'fn/run.sh': { content: '#!/bin/sh\n', mode: '100755' },
};

describe('build context', () => {
  it('is byte-for-byte deterministic, sorted, and leaves manifests out', async () => {
    const make = () =>
      createBuildContext({
        runtime: 'nodejs20',
        runtimesDir: `${PACKAGE_ROOT}runtimes`,
        snapshot: snapshot(files),
        codeDir: 'fn',
        excludedFiles: new Set(['fn/function.yaml']),
      });
    const a = await make();
    await new Promise((r) => setTimeout(r, 1100)); // a different wall clock must not change a byte
    const b = await make();
    expect(a.entries).toEqual([
      'Dockerfile',
      'code/',
      'code/handler.js',
      'code/lib/',
      'code/lib/b.js',
      'code/run.sh',
      'server.js',
    ]);
    expect(Buffer.compare(a.archive, b.archive)).toBe(0);
  });

  it('closes its gzip compressor when the archive is done, not at some later GC', async () => {
    // tar compresses through minizlib, which keeps node's zlib handle (and its deflate state, ~270 KB
    // of native memory) open after the stream ends; a first sync makes hundreds of contexts.
    const close = vi.spyOn(zlib.Gzip.prototype, 'close');
    try {
      await createBuildContext({
        runtime: 'nodejs20',
        runtimesDir: `${PACKAGE_ROOT}runtimes`,
        snapshot: snapshot(files),
        codeDir: 'fn',
        excludedFiles: new Set(),
      });
      expect(close).toHaveBeenCalledTimes(1);
    } finally {
      close.mockRestore();
    }
  });

  it('ships what each runtime Dockerfile copies (go: build.sh and the sdk)', async () => {
    const go = await createBuildContext({
      runtime: 'go1.21',
      runtimesDir: `${PACKAGE_ROOT}runtimes`,
      snapshot: snapshot({ 'h/handler.go': { content: 'package handler\n' } }),
      codeDir: 'h',
      excludedFiles: new Set(),
    });
    expect(go.entries).toEqual(
      expect.arrayContaining(['Dockerfile', 'build.sh', 'sdk/', 'sdk/go.mod', 'code/handler.go']),
    );
    const py = await createBuildContext({
      runtime: 'python3.11',
      runtimesDir: `${PACKAGE_ROOT}runtimes`,
      snapshot: snapshot({ 'p/main.py': { content: 'def handle(e, c): pass\n' } }),
      codeDir: 'p',
      excludedFiles: new Set(),
    });
    expect(py.entries).toEqual(['Dockerfile', 'code/', 'code/main.py', 'server.py']);
  });

  it("a context whose writer was SIGKILLed mid-write is removed by the next writer's staging; live writers keep theirs", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sless-context-test-'));
    const script = join(dir, 'writer.ts');
    // The writer stages a context in `dir` and stops for good at the first file read, as a process
    // killed mid-write would.
    await writeFile(
      script,
      `import { createBuildContext } from ${JSON.stringify(join(PACKAGE_ROOT, 'src/packaging/build-context.ts'))};
void createBuildContext({
  runtime: 'nodejs20',
  runtimesDir: ${JSON.stringify(`${PACKAGE_ROOT}runtimes`)},
  snapshot: {
    commit: 'c'.repeat(40),
    listFiles: async () => [{ path: 'fn/handler.js', mode: '100644', oid: 'x' }],
    readFile: () => { process.stdout.write('staged\\n'); return new Promise(() => {}); },
  },
  codeDir: 'fn',
  excludedFiles: new Set(),
});
`,
    );
    const writer = spawn(process.execPath, ['--import', 'tsx', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TMPDIR: dir },
    });
    const alive = spawn('sleep', ['600'], { stdio: 'ignore' });
    try {
      // A writer that fails before it stages says so here, instead of leaving the test to time out.
      const first = await Promise.race([
        once(writer.stdout, 'data').then(([line]) => String(line)),
        once(writer, 'exit').then(([code, signal]) => `writer exited (${code ?? signal}) before staging`),
      ]);
      expect(first).toBe('staged\n');
      const staged = (await readdir(dir)).filter((name) => name.startsWith('sless-context-'));
      expect(staged).toEqual([expect.stringMatching(new RegExp(`^sless-context-${writer.pid}-`))]);
      writer.kill('SIGKILL');
      await once(writer, 'exit');
      const kept = [
        `sless-context-${alive.pid}-live`,
        `sless-context-${process.pid}-mine`,
        'sless-context-x',
      ];
      for (const name of kept) await mkdir(join(dir, name));

      // What the next writer's first context makes (build-context's staging, rooted in `dir` here).
      const next = new OwnedTempDirs('sless-context-', dir);
      const left = (await readdir(dir)).filter((name) => name.startsWith('sless-context-'));
      expect(left.sort()).toEqual([...kept].sort());
      expect(next.removeLeftBehind()).toEqual([]);
    } finally {
      writer.kill('SIGKILL');
      alive.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
