// Fair shares: tenant A commits N functions at once (default 5,000); while that backlog builds,
// tenant B commits a one-line change to its running function. The figure is B's commit-to-serving
// time under A's backlog; the baseline, in the same run, is the same change with no backlog. Also
// printed: how much of A's backlog was done when B's change went live, and how long A took in all.
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

  const backlogStarted = performance.now();
  await scenario.commitBacklog();
  const applied = performance.now() - backlogStarted;
  const underBacklog: number[] = [];
  const doneAt: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    underBacklog.push(await changeTime());
    doneAt.push(await scenario.backlogDone());
  }
  await until(async () => (await scenario.backlogDone()) === N);
  const drained = performance.now() - backlogStarted;
  await scenario.close();

  console.log(
    `tenant A: ${N} functions in one commit; applied after ${ms(applied)}, all reconciled after ${ms(drained)}`,
  );
  console.log(
    `tenant B one-line change, no backlog (baseline): median ${ms(median(baseline))} [${baseline.map(ms).join(', ')}]`,
  );
  console.log(
    `tenant B one-line change, under A's backlog:      median ${ms(median(underBacklog))} [${underBacklog.map(ms).join(', ')}]`,
  );
  console.log(`ratio under backlog / baseline: ${(median(underBacklog) / median(baseline)).toFixed(2)}`);
  console.log(`A's functions reconciled when each B change went live: ${doneAt.join(', ')} of ${N}`);
}

await main();
