// Build garbage collection when there is nothing to do: a local state directory with FUNCTIONS
// functions of BUILDS builds each (at most the history limit, so nothing is past it), every Function in
// the store. Measures one collector pass (median of RUNS), against a baseline in the same run: a bare
// walk of the same build directories (readdir of every namespace and function), the least any pass
// has to look at. Then one pass with one more build per function, which prunes FUNCTIONS builds.
// Run: npx tsx bench/build-gc.ts
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { SlessFunction } from '../src/core/resources.js';
import { LocalBuildArchive } from '../src/platform/local/build/build-archive.js';
import { MemoryStore } from '../src/platform/local/memory-store.js';
import { BuildCollector } from '../src/reconcile/build-gc.js';
import { report } from './report.js';
import { median, ms } from './stats.js';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const BUILDS = 5;
const RUNS = Number(process.env.RUNS ?? 7);

async function addBuild(stateDir: string, fn: string, n: number): Promise<void> {
  const dir = join(stateDir, 'builds', 'default', fn, `key${n}`);
  await mkdir(join(dir, 'code'), { recursive: true });
  await writeFile(
    join(dir, 'build.json'),
    JSON.stringify({
      buildKey: `key${n}`,
      commit: `c${n}`,
      result: 'Succeeded',
      startedAt: new Date(n * 1000).toISOString(),
      finishedAt: new Date(n * 1000 + 500).toISOString(),
    }),
  );
}

async function walk(stateDir: string): Promise<number> {
  let count = 0;
  const root = join(stateDir, 'builds');
  for (const ns of await readdir(root))
    for (const fn of await readdir(join(root, ns))) count += (await readdir(join(root, ns, fn))).length;
  return count;
}

async function main(): Promise<void> {
  const stateDir = await mkdtemp(join(tmpdir(), 'sless-bench-gc-'));
  const logger = pino({ level: 'silent' });
  const store = new MemoryStore();
  try {
    for (let f = 0; f < FUNCTIONS; f++) {
      const name = `fn-${f}`;
      for (let n = 1; n <= BUILDS; n++) await addBuild(stateDir, name, n);
      await store.apply({
        apiVersion: 'sless.dev/v1alpha1',
        kind: 'Function',
        metadata: { name, namespace: 'default', annotations: { 'sless.dev/build-key': `key${BUILDS}` } },
        spec: {
          runtime: 'nodejs20',
          entrypoint: 'handler.handle',
          memoryMb: 128,
          timeoutSec: 30,
          replicas: 1,
        },
      } as SlessFunction);
    }
    const archive = new LocalBuildArchive({
      stateDir,
      builder: { isBuilding: () => false, activeStaging: () => new Set() },
      servingDirs: () => new Set(),
      limit: BUILDS,
      logger,
    });
    const gc = new BuildCollector({ store, archive, limit: BUILDS, logger });
    const idle: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      let started = performance.now();
      if ((await walk(stateDir)) !== FUNCTIONS * BUILDS) throw new Error('walk miscounted');
      bare.push(performance.now() - started);
      started = performance.now();
      const pass = await gc.collect();
      idle.push(performance.now() - started);
      if (pass.pruned.length !== 0) throw new Error(`an idle pass pruned ${pass.pruned.length} builds`);
    }
    for (let f = 0; f < FUNCTIONS; f++) await addBuild(stateDir, `fn-${f}`, BUILDS + 1);
    const started = performance.now();
    const pass = await gc.collect();
    const pruning = performance.now() - started;
    if (pass.pruned.length !== FUNCTIONS) throw new Error(`pruned ${pass.pruned.length}, not ${FUNCTIONS}`);
    const ratio = median(idle) / median(bare);
    console.log(
      `idle pass over ${FUNCTIONS} functions × ${BUILDS} builds: ${ms(median(idle))} (bare walk ${ms(median(bare))}, ratio ${ratio.toFixed(2)}); pass pruning ${FUNCTIONS}: ${ms(pruning)}`,
    );
    report({
      bench: 'build-gc',
      measure: `idle pass, ${FUNCTIONS} fns × ${BUILDS} builds`,
      value: ms(median(idle)),
      baseline: `bare walk ${ms(median(bare))}`,
      ratio,
    });
    report({ bench: 'build-gc', measure: `pass pruning ${FUNCTIONS} builds`, value: ms(pruning) });
  } finally {
    await rm(stateDir, { recursive: true, force: true });
  }
}

await main();
