// Fair shares: tenant A commits N functions at once (default 5,000); while that backlog builds,
// tenant B commits a one-line change to its running function. The figure is B's commit-to-serving
// time under A's backlog; the baseline, in the same run, is the same change with no backlog. Also
// printed: how much of A's backlog was done when B's change went live (DRAIN=1: and how long A
// took in all).
// Run: npx tsx bench/fair-share.ts   (N=500 for a quicker run)
import { startBacklogScenario } from '../test/helpers/backlog.js';
import { median, ms } from './stats.js';

const N = Number(process.env.N ?? 5000);
const RUNS = Number(process.env.RUNS ?? 3);

async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 5));
}

async function main(): Promise<void> {
  const scenario = await startBacklogScenario(N);
  let version = 0;
  const changeTime = async () => {
    version++;
    const started = performance.now();
    await scenario.changeB(version);
    await until(() => scenario.bServes(version));
    return performance.now() - started;
  };
  const baseline: number[] = [];
  for (let i = 0; i < RUNS; i++) baseline.push(await changeTime());
  console.log(
    `tenant B one-line change, no backlog (baseline): median ${ms(median(baseline))} [${baseline.map(ms).join(', ')}]`,
  );

  const backlogStarted = performance.now();
  await scenario.commitBacklog();
  const applied = performance.now() - backlogStarted;
  console.log(`tenant A: ${N} functions in one commit, applied after ${ms(applied)}`);
  const underBacklog: number[] = [];
  const doneAt: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    underBacklog.push(await changeTime());
    doneAt.push(await scenario.backlogDone());
    console.log(
      `  B change ${i + 1}: ${ms(underBacklog[i] as number)}, A's backlog then ${doneAt[i]}/${N} done`,
    );
  }
  console.log(
    `tenant B one-line change, under A's backlog: median ${ms(median(underBacklog))} [${underBacklog.map(ms).join(', ')}]`,
  );
  console.log(`ratio under backlog / baseline: ${(median(underBacklog) / median(baseline)).toFixed(2)}`);
  if (process.env.DRAIN === '1') {
    // Polled slowly: listing thousands of functions is itself work that would slow the backlog.
    while ((await scenario.backlogDone()) < N) await new Promise((r) => setTimeout(r, 2000));
    console.log(`tenant A: all ${N} reconciled after ${ms(performance.now() - backlogStarted)}`);
  }
  await scenario.close();
}

await main();
