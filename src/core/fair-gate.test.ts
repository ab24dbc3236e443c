/**
 * FairGate's slots shared between namespaces: another namespace's task goes before a long backlog, a
 * change to a running function before cold work, sources of a namespace take turns in order, stop()
 * rejects the waiting tasks while the running one finishes, and a failing task frees its slot.
 */
import { describe, expect, test } from 'vitest';
import { FairGate, type FairTask, GateStoppedError } from './fair-gate.js';

/** A task that finishes when the test says so, recording when it started. */
function controllable() {
  const started: string[] = [];
  const finishers = new Map<string, () => void>();
  const run = (gate: FairGate, id: string, task: FairTask) =>
    gate.run(task, () => {
      started.push(id);
      return new Promise<void>((resolve) => finishers.set(id, resolve));
    });
  const finish = async (id: string) => {
    await new Promise((resolve) => setImmediate(resolve));
    finishers.get(id)?.();
    // Let the gate hand the slot on (promise callbacks all run before the next macrotask).
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { started, run, finish };
}

const cold = (tenant: string, flow = 'repo'): FairTask => ({ tenant, flow, warm: false });

describe('FairGate', () => {
  test("another namespace's one task takes the first free slot, however long the backlog", async () => {
    const gate = new FairGate({ slots: 2 });
    const c = controllable();
    for (let i = 0; i < 1000; i++) void c.run(gate, `a${i}`, cold('tenant-a'));
    await c.finish('none');
    expect(c.started).toEqual(['a0', 'a1']);
    void c.run(gate, 'b0', cold('tenant-b'));
    await c.finish('a0');
    expect(c.started).toEqual(['a0', 'a1', 'b0']);
    expect(gate.waitingCount).toBe(998);
  });

  test('a change to a running function goes ahead of a cold backlog, even in the same namespace', async () => {
    const gate = new FairGate({ slots: 1 });
    const c = controllable();
    void c.run(gate, 'a0', cold('a'));
    void c.run(gate, 'a1', cold('a'));
    void c.run(gate, 'b0', cold('b'));
    void c.run(gate, 'a-warm', { tenant: 'a', flow: 'repo', warm: true });
    await c.finish('a0');
    expect(c.started).toEqual(['a0', 'a-warm']);
    await c.finish('a-warm');
    expect(c.started).toEqual(['a0', 'a-warm', 'b0']);
  });

  test('sources of one namespace take turns; tasks of one source keep their order', async () => {
    const gate = new FairGate({ slots: 1 });
    const c = controllable();
    void c.run(gate, 'x0', cold('ns', 'x'));
    for (const id of ['x1', 'x2', 'x3']) void c.run(gate, id, cold('ns', 'x'));
    for (const id of ['y1', 'y2']) void c.run(gate, id, cold('ns', 'y'));
    for (const id of ['x0', 'y1', 'x1', 'y2', 'x2']) await c.finish(id);
    expect(c.started).toEqual(['x0', 'y1', 'x1', 'y2', 'x2', 'x3']);
  });

  test('stop: waiting tasks never start and reject; the running one finishes', async () => {
    const gate = new FairGate({ slots: 1 });
    const c = controllable();
    const running = c.run(gate, 'a0', cold('a'));
    const waiting = c.run(gate, 'a1', cold('a'));
    await c.finish('none');
    gate.stop();
    await expect(waiting).rejects.toThrow(GateStoppedError);
    await c.finish('a0');
    await expect(running).resolves.toBeUndefined();
    expect(c.started).toEqual(['a0']);
  });

  test('a failing task frees its slot and rejects to its caller', async () => {
    const gate = new FairGate({ slots: 1 });
    await expect(gate.run(cold('a'), () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(gate.run(cold('a'), async () => 'next')).resolves.toBe('next');
  });
});
