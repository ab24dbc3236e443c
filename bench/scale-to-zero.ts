// Scale-to-zero cold start through sless: a function parked after 1 idle second is called through
// /fn/; the time from sending the request to the first response byte, median of RUNS (default 10),
// per runtime. Baseline in the same run: the same request to the warm function.
// Run: npx tsx bench/scale-to-zero.ts
import { request } from 'undici';
import { functionManifest, TestRepo } from '../test/helpers/git.js';
import { startTestSystem } from '../test/helpers/local-system.js';
import { report } from './report.ts';
import { median, ms } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 10);
const FUNCTIONS = {
  'lazy-node': {
    runtime: 'nodejs20',
    entrypoint: 'handler.handle',
    file: 'handler.js',
    code: 'exports.handle = () => "ok";\n',
  },
  'lazy-python': {
    runtime: 'python3.11',
    entrypoint: 'handler.handle',
    file: 'handler.py',
    code: 'def handle(event, context):\n    return "ok"\n',
  },
  'lazy-go': {
    runtime: 'go1.21',
    entrypoint: 'handler.Handle',
    file: 'handler.go',
    code: 'package handler\n\nimport (\n\t"context"\n\n\tsless "sless.dev/runtime"\n)\n\nfunc Handle(ctx context.Context, event sless.Event) (any, error) { return "ok", nil }\n',
  },
} as const;

async function timeToFirstByte(url: string): Promise<number> {
  const started = performance.now();
  const response = await request(url);
  const elapsed = performance.now() - started;
  await response.body.text();
  if (response.statusCode !== 200) throw new Error(`${url}: ${response.statusCode}`);
  return elapsed;
}

async function main(): Promise<void> {
  const files: Record<string, string> = {};
  for (const [name, f] of Object.entries(FUNCTIONS)) {
    files[`${name}/function.yaml`] = functionManifest(name, {
      runtime: f.runtime,
      entrypoint: f.entrypoint,
      scaleToZero: { idleSeconds: 1 },
    });
    files[`${name}/${f.file}`] = f.code;
  }
  const repo = await TestRepo.create(files);
  const system = await startTestSystem({ url: repo.dir });
  const names = Object.keys(FUNCTIONS);
  for (;;) {
    const fns = await system.store.list('Function');
    if (
      fns.length === names.length &&
      fns.every((f) => f.status?.phase === 'Ready' || f.status?.phase === 'ScaledToZero')
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log('runtime       cold (parked) median   warm median   ratio');
  for (const name of names) {
    const cold: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      while (!system.platform.isParked('default', name)) await new Promise((r) => setTimeout(r, 50));
      cold.push(await timeToFirstByte(`${system.url}/fn/default/${name}`));
      warm.push(await timeToFirstByte(`${system.url}/fn/default/${name}`));
    }
    const c = median(cold);
    const w = median(warm);
    console.log(`${name.padEnd(13)} ${ms(c).padStart(20)}   ${ms(w).padStart(11)}   ${(c / w).toFixed(0)}x`);
    report({
      bench: 'scale-to-zero',
      measure: `${name} parked → first byte via /fn/ (median of ${RUNS})`,
      value: ms(c),
      baseline: `warm ${ms(w)}`,
      ratio: c / w,
    });
  }
  await system.close();
  await repo.remove();
}

await main();
