/**
 * Scale-down on the local platform drains: an extra instance that the autoscaler lets go keeps its
 * process until the request it still holds has answered, so shrinking fails no request. Real
 * function processes; each request waits for a gate file named after its own id, so the test
 * releases them one by one, and the handler reports its pid, so the test sees which process holds
 * what and whether it is still alive. The runtime itself lets requests finish for a while after
 * SIGTERM, so a process alive is not proof enough: the handler also reports whether its process was
 * told to stop while the request was still in flight, which only a drain before the stop avoids.
 */
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processExists } from '../../src/core/left-behind.js';
import { functionManifest, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem, untilInstances } from '../helpers/local-system.js';

// Without an id a request answers at once; with one it marks its arrival (held-<id>, holding its pid)
// and waits for open-<id>. While it waits, ping-<id> makes it answer pong-<id>: whether its process
// has had SIGTERM so far.
const GATED = nodeHandler(`
  const fs = require('node:fs');
  const path = require('node:path');
  if (!globalThis.watching) {
    globalThis.watching = true;
    globalThis.terminated = false;
    process.on('SIGTERM', () => { globalThis.terminated = true; });
  }
  const at = (name) => path.join(process.env.DIR, name);
  const id = event.query?.id;
  if (id) {
    fs.writeFileSync(at('held-' + id), String(process.pid));
    while (!fs.existsSync(at('open-' + id))) {
      if (fs.existsSync(at('ping-' + id)) && !fs.existsSync(at('pong-' + id)))
        fs.writeFileSync(at('pong-' + id), String(globalThis.terminated));
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return { pid: process.pid, terminated: globalThis.terminated };
`);

describe('scale-down on the local platform', () => {
  let repo: TestRepo;
  let system: TestSystem;
  let dir: string;
  const ids = ['a', 'b', 'c', 'd', 'e'];

  beforeAll(async () => {
    dir = await tempDir('drain');
    repo = await TestRepo.create({
      'drain/function.yaml': functionManifest('drain', {
        env: { DIR: dir },
        scale: { min: 1, max: 3, target: 1, stableWindowSec: 6 },
      }),
      'drain/handler.js': GATED,
    });
    system = await startTestSystem({ url: repo.dir, sandbox: 'off', proxyThread: true });
    await eventually(async () => (await system.functionStatus('drain'))?.phase === 'Ready', 60_000, 'Ready');
  });

  afterAll(async () => {
    await Promise.all(ids.map((id) => writeFile(join(dir, `open-${id}`), '')));
    await system?.close();
    await repo?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  const call = async (id?: string) => {
    const r = await system.call(`/fn/default/drain/${id ? `?id=${id}` : ''}`);
    return { status: r.status, body: (await r.json()) as { pid?: number; terminated?: boolean } };
  };
  const instances = async () => (await system.functionStatus('drain'))?.instances;
  const heldPids = async (): Promise<Map<string, number>> => {
    const out = new Map<string, number>();
    for (const f of (await readdir(dir)).filter((n) => n.startsWith('held-'))) {
      out.set(f.slice('held-'.length), Number(await readFile(join(dir, f), 'utf8')));
    }
    return out;
  };

  it('keeps a leaving instance until its request in flight has answered, then stops it', async () => {
    expect(await instances()).toEqual({ desired: 1, ready: 1 });
    const first = (await call()).body.pid;
    expect(first).toBeTypeOf('number');

    // Three held on the only instance: the autoscaler starts two more.
    const early = ids.slice(0, 3).map((id) => ({ id, answer: call(id) }));
    await untilInstances(system, 'drain', 3);
    // Two more go to the least busy instances, the new ones.
    const late = ids.slice(3).map((id) => ({ id, answer: call(id) }));
    const pids = await eventually(
      async () => {
        const now = await heldPids();
        return now.size === 5 ? now : undefined;
      },
      15_000,
      'five requests held',
    );
    const onExtra = ids.find((id) => pids.get(id) !== first);
    expect(onExtra, 'a request held on an instance other than the first').toBeDefined();
    const keptId = onExtra as string;
    const keptPid = pids.get(keptId) as number;
    expect(new Set(pids.values()).size).toBe(3);

    // Everything but that one request finishes: load drops to one in flight, so one instance.
    const all = [...early, ...late];
    const kept = all.find((r) => r.id === keptId);
    const rest = all.filter((r) => r.id !== keptId);
    await Promise.all(rest.map((r) => writeFile(join(dir, `open-${r.id}`), '')));
    const answers = await Promise.all(rest.map((r) => r.answer));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    await eventually(async () => (await instances())?.desired === 1, 30_000, 'desired back to one');

    // Let go, but still draining: a stop without drain has signalled the process by the time the
    // status shows the lower count (one synchronous step), and the handler notices it before it answers
    // the ping. Draining, the process lives on untouched while the request is in flight.
    await writeFile(join(dir, `ping-${keptId}`), '');
    const pong = await eventually(
      async () => await readFile(join(dir, `pong-${keptId}`), 'utf8').catch(() => undefined),
      15_000,
      'the held request answering the ping',
    );
    expect(pong, 'SIGTERM while its request was still in flight').toBe('false');
    expect(processExists(keptPid)).toBe(true);
    await writeFile(join(dir, `open-${keptId}`), '');
    const last = await (kept as (typeof all)[number]).answer;
    expect(last).toEqual({ status: 200, body: { pid: keptPid, terminated: false } });

    // Drained: it stops, one instance remains, and the function still answers.
    await untilInstances(system, 'drain', 1);
    await eventually(async () => !processExists(keptPid), 15_000, 'the drained process gone');
    const after = await call();
    expect(after.status).toBe(200);
    expect(after.body.pid).not.toBe(keptPid);
    expect(after.body.terminated).toBe(false);
  }, 120_000);
});
