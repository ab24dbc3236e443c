// Commit to serving: from `git commit` in a watched local repository to the first proxied response
// that carries the new body, for a Node function without dependencies. Median of RUNS (default 12).
// Baseline in the same run: spawning the same runtime process and waiting for /healthz alone, the
// part of a rollout no platform can skip. Run: npx tsx bench/commit-to-serving.ts
import { join } from 'node:path';
import { pino } from 'pino';
import { request } from 'undici';
import { PACKAGE_ROOT } from '../src/config/config.js';
import { freePort } from '../src/platform/local/ports.js';
import { RuntimeProcess } from '../src/platform/local/runtime-process.js';
import { functionManifest, nodeHandler, TestRepo } from '../test/helpers/git.js';
import { startTestSystem } from '../test/helpers/local-system.js';
import { report } from './report.ts';
import { median, ms, percentile } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 12);

async function bodyOf(url: string): Promise<string> {
  const response = await request(url);
  return response.body.text();
}

async function main(): Promise<void> {
  const repo = await TestRepo.create({
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return 'v0';`),
  });
  const system = await startTestSystem({ url: repo.dir });
  const url = `${system.url}/fn/default/hello`;
  while ((await bodyOf(url)) !== '"v0"') await new Promise((r) => setTimeout(r, 20));

  const commitToServing: number[] = [];
  for (let i = 1; i <= RUNS; i++) {
    const started = performance.now();
    await repo.commit({ 'hello/handler.js': nodeHandler(`return 'v${i}';`) });
    while ((await bodyOf(url)) !== `"v${i}"`) await new Promise((r) => setTimeout(r, 2));
    commitToServing.push(performance.now() - started);
  }

  const fn = await system.store.get('Function', 'default', 'hello');
  const buildDir = (fn?.status as { image?: string } | undefined)?.image ?? '';
  const processStart: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const runtime = new RuntimeProcess(
      {
        command: process.execPath,
        args: [join(PACKAGE_ROOT, 'runtimes', 'nodejs20', 'server.js')],
        cwd: join(buildDir, 'code'),
        env: {
          PATH: process.env.PATH ?? '',
          SLESS_ENTRYPOINT: 'handler.handle',
          SLESS_CODE_DIR: join(buildDir, 'code'),
        },
      },
      await freePort(),
      pino({ level: 'silent' }),
    );
    const started = performance.now();
    await runtime.start(10_000);
    processStart.push(performance.now() - started);
    await runtime.stop();
  }
  await system.close();
  await repo.remove();

  const m = median(commitToServing);
  const base = median(processStart);
  console.log(
    `commit → serving, ${RUNS} runs: median ${ms(m)}, p90 ${ms(percentile(commitToServing, 90))}, max ${ms(Math.max(...commitToServing))}`,
  );
  console.log(`baseline (runtime spawn → /healthz): median ${ms(base)}`);
  console.log(
    `ratio commit→serving / process start: ${(m / base).toFixed(2)}x; target: median under 1000 ms -> ${m < 1000 ? 'met' : 'missed'}`,
  );
  report({
    bench: 'commit-to-serving',
    measure: `commit → new body served, 1 function (median of ${RUNS})`,
    value: ms(m),
    baseline: `runtime spawn → /healthz ${ms(base)}`,
    ratio: m / base,
    target: '< 1000 ms',
    met: m < 1000,
  });
}

await main();
