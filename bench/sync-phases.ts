// Where one GitSource sync of FUNCTIONS (default 1000) Node functions spends its time, in-process and
// without the platform: resolve the head, read and validate manifests, list the namespace's
// Functions, plan (build keys), apply. First sync, ROUNDS (default 15) one-function commits with warm
// caches (medians per phase), then two after a "restart" (new reader and caches, same store).
// Run: npx tsx bench/sync-phases.ts
import { performance } from 'node:perf_hooks';
import { loadManifests, ParsedManifestCache } from '../src/manifest/load.js';
import { MemoryStore } from '../src/platform/local/memory-store.js';
import { BuildKeyCache, planSource } from '../src/reconcile/plan.js';
import { applyPlan } from '../src/reconcile/source-sync.js';
import { LocalRepositoryReader } from '../src/source/readers.js';
import { functionManifest, gitSource, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { report } from './report.ts';
import { median } from './stats.js';

const FUNCTIONS = Number(process.env.FUNCTIONS ?? 1000);
const ROUNDS = Number(process.env.ROUNDS ?? 15);
const files: Record<string, string> = {};
for (let i = 0; i < FUNCTIONS; i++) {
  files[`functions/fn-${i}/function.yaml`] = functionManifest(`fn-${i}`);
  files[`functions/fn-${i}/handler.js`] = nodeHandler(`return 'fn-${i} v0';`);
}
const repo = await TestRepo.create(files);
const store = new MemoryStore();
const source = gitSource('repo', 'default', repo.dir);
await store.apply(source);

interface Caches {
  reader: LocalRepositoryReader;
  manifests: ParsedManifestCache;
  buildKeys: BuildKeyCache;
}
const fresh = (): Caches => ({
  reader: new LocalRepositoryReader({ path: repo.dir, branch: 'main' }),
  manifests: new ParsedManifestCache(),
  buildKeys: new BuildKeyCache(),
});

type Row = Record<string, number>;
async function sync(caches: Caches): Promise<Row> {
  const row: Row = {};
  let last = performance.now();
  const mark = (phase: string) => {
    const now = performance.now();
    row[phase] = now - last;
    last = now;
  };
  const started = last;
  const head = await caches.reader.resolveHead();
  const snapshot = await caches.reader.snapshot(head);
  mark('resolve head');
  const loaded = await loadManifests(snapshot, { root: '.', namespace: 'default', cache: caches.manifests });
  mark('manifests');
  const functions = await store.list('Function', { namespace: 'default' });
  mark('list Functions');
  const plan = await planSource(source, snapshot, loaded, { buildKeys: caches.buildKeys });
  mark('plan');
  const applied = await applyPlan(store, source, plan, undefined, functions);
  mark('apply');
  row.total = performance.now() - started;
  row.changed = applied.changed;
  return row;
}

const rows: Record<string, Record<string, string>> = {};
const show = (label: string, row: Row) => {
  rows[label] = Object.fromEntries(
    Object.entries(row).map(([k, v]) => [k, k === 'changed' ? String(v) : `${v.toFixed(1)} ms`]),
  );
};
const medianRow = (all: Row[]): Row =>
  Object.fromEntries(Object.keys(all[0] ?? {}).map((k) => [k, median(all.map((r) => r[k] ?? 0))]));

let caches = fresh();
show('first sync', await sync(caches));
const warm: Row[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  await repo.commit({ [`functions/fn-${round}/handler.js`]: nodeHandler(`return 'v${round}';`) });
  warm.push(await sync(caches));
}
const first = rows['first sync'];
const oneChange = medianRow(warm);
show(`one-function commit (median of ${ROUNDS})`, oneChange);
caches = fresh();
const restarted: Row[] = [];
for (let round = 1; round <= 2; round++) {
  await repo.commit({ [`functions/fn-${ROUNDS + round}/handler.js`]: nodeHandler(`return 'r${round}';`) });
  restarted.push(await sync(caches));
  show(`after a restart, commit #${round}`, restarted[round - 1] as Row);
}
const firstTotal = Number.parseFloat(first?.total ?? 'NaN');
report(
  {
    bench: 'sync-phases',
    measure: `one sync of a one-function commit, ${FUNCTIONS} functions, warm caches (median of ${ROUNDS})`,
    value: `${oneChange.total?.toFixed(1)} ms`,
    baseline: `first sync ${first?.total}`,
    ratio: (oneChange.total ?? 0) / firstTotal,
  },
  {
    bench: 'sync-phases',
    measure: `one sync of the first one-function commit after a restart (cold caches), ${FUNCTIONS} functions`,
    value: `${restarted[0]?.total?.toFixed(1)} ms`,
    baseline: `first sync ${first?.total}`,
    ratio: (restarted[0]?.total ?? 0) / firstTotal,
  },
);
console.log(`one sync of ${FUNCTIONS} functions, by phase`);
console.table(rows);
await repo.remove();
