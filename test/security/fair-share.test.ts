/**
 * Row 5: one tenant's 5,000-function commit does not hold up another tenant's one-line change. The
 * bound is the test's own timeout; what it asserts, at the moment B's change answers, is that A's
 * backlog is still far from done: B went ahead of it rather than after it. bench/fair-share.ts
 * gives the times.
 */
import { afterAll, expect, test } from 'vitest';
import { type BacklogScenario, startBacklogScenario } from '../helpers/backlog.js';
import { eventually } from '../helpers/local-system.js';

const COUNT = 5000;
let scenario: BacklogScenario | undefined;
afterAll(async () => {
  await scenario?.close();
});

test("a change to B's running function goes live while A's 5,000-function backlog is still building", async () => {
  scenario = await startBacklogScenario(COUNT);
  await scenario.commitBacklog();
  const s = scenario;
  await s.changeB(1);
  await eventually(() => s.bServes(1), 120_000, "tenant B's change under A's backlog");
  const done = await s.backlogDone();
  // FIFO would have run all of A's functions first; fair shares run B's change next.
  expect(done).toBeLessThan(COUNT / 2);
  // And the backlog is really being worked on, not stalled by B.
  await eventually(async () => (await s.backlogDone()) > done, 60_000, "A's backlog to move on");
}, 900_000);
