/**
 * FairGate's choice of namespace for a freed slot: the fewest tasks running decides first, and the time
 * a namespace was served last only between equal counts.
 */
import { expect, test } from 'vitest';
import { FairGate, type FairTask } from './fair-gate.js';

const task = (tenant: string): FairTask => ({ tenant, flow: 'repo', warm: false });

/** Lets the gate hand a freed slot on: its promise callbacks all run before the next macrotask. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

// The namespace served last may still be the one with fewer tasks running: the count of running
// tasks decides first, and only between equal counts does the time served last.
test('a freed slot goes to the namespace with the fewest tasks running, even when it was served last', async () => {
  const gate = new FairGate({ slots: 3 });
  const started: string[] = [];
  const finishers = new Map<string, () => void>();
  const run = (id: string, tenant: string) =>
    void gate.run(task(tenant), () => {
      started.push(id);
      return new Promise<void>((resolve) => finishers.set(id, resolve));
    });
  // A takes two slots, then B the third: B is now the namespace served last.
  run('a1', 'a');
  run('a2', 'a');
  run('b1', 'b');
  run('a3', 'a');
  run('b2', 'b');
  await settle();
  expect(started).toEqual(['a1', 'a2', 'b1']);
  expect(gate.waitingCount).toBe(2);
  // B's task ends: B runs none, A runs two. B's next task goes first, and only it.
  finishers.get('b1')?.();
  await settle();
  expect(started).toEqual(['a1', 'a2', 'b1', 'b2']);
  expect(gate.waitingCount).toBe(1);
  finishers.get('a1')?.();
  await settle();
  expect(started).toEqual(['a1', 'a2', 'b1', 'b2', 'a3']);
});
