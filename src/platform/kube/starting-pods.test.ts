/**
 * StartingPods against a real HTTP server standing in for the pods' runtimes, each pod at its own path:
 * a started pod counts once its /healthz answers and is asked no more; a pod the kubelet calls Ready
 * counts unasked; the kubelet's later "not ready" wins over an earlier answer; a pod that stops,
 * terminates or restarts leaves the count. The end to end rollout is test/e2e's and bench/'s.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATION_REVISION, LABEL_FUNCTION } from './labels.js';
import type { KubeObject } from './objects.js';
import { StartingPods } from './starting-pods.js';

let server: Server;
let base = '';
/** Which pod addresses answer /healthz, and how often each was asked. */
const up = new Set<string>();
const asked = new Map<string, number>();

beforeAll(async () => {
  server = createServer((req, res) => {
    const ip = (req.url ?? '').split('/')[1] ?? '';
    asked.set(ip, (asked.get(ip) ?? 0) + 1);
    res.writeHead(up.has(ip) ? 200 : 503).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function pod(
  name: string,
  ip: string,
  options: {
    ready?: boolean;
    running?: boolean;
    restarts?: number;
    revision?: string;
    terminating?: boolean;
    /** The kubelet's startup probe passed. */
    started?: boolean;
  } = {},
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'ns',
      labels: { [LABEL_FUNCTION]: 'f' },
      annotations: { [ANNOTATION_REVISION]: options.revision ?? 'r2' },
      ...(options.terminating ? { deletionTimestamp: '2026-12-07T00:00:00Z' } : {}),
    },
    status: {
      phase: 'Running',
      podIP: ip,
      conditions: [{ type: 'Ready', status: options.ready ? 'True' : 'False' }],
      containerStatuses: [
        {
          state: options.running === false ? { waiting: { reason: 'CrashLoopBackOff' } } : { running: {} },
          restartCount: options.restarts ?? 0,
          started: options.started ?? false,
        },
      ],
    },
  } as KubeObject;
}

function tracker() {
  const pods = new StartingPods({ origin: (ip) => `${base}/${ip}` });
  const told: string[] = [];
  const waiters: (() => void)[] = [];
  pods.onChange((namespace, fn) => {
    told.push(`${namespace}/${fn}`);
    for (const wake of waiters.splice(0)) wake();
  });
  const nextChange = () => new Promise<void>((r) => waiters.push(r));
  return { pods, told, nextChange };
}

describe('StartingPods', () => {
  it('counts a started pod once it answers, and asks it no more', async () => {
    const { pods, told, nextChange } = tracker();
    const changed = nextChange();
    pods.observe(pod('a', '10.0.0.1'), false);
    // Asked and refused while its runtime is not up: not counted.
    while ((asked.get('10.0.0.1') ?? 0) < 2) await new Promise((r) => setTimeout(r, 20));
    expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
    up.add('10.0.0.1');
    await changed;
    expect(pods.answering('ns', 'f', 'r2')).toEqual(['10.0.0.1']);
    expect(pods.answering('ns', 'f', 'r1')).toEqual([]);
    expect(pods.answering('ns', 'g', 'r2')).toEqual([]);
    const askedOnce = asked.get('10.0.0.1');
    // A second pod's answer comes after at least one more round: the first was not asked meanwhile.
    const second = nextChange();
    up.add('10.0.0.2');
    pods.observe(pod('b', '10.0.0.2'), false);
    await second;
    expect(pods.answering('ns', 'f', 'r2')).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(asked.get('10.0.0.1')).toBe(askedOnce);
    expect(told).toEqual(['ns/f', 'ns/f']);
    pods.stop();
  });

  it('counts a pod the kubelet calls Ready without asking it', () => {
    const { pods, told } = tracker();
    pods.observe(pod('c', '10.0.0.3', { ready: true }), false);
    expect(pods.answering('ns', 'f', 'r2')).toEqual(['10.0.0.3']);
    expect(told).toEqual(['ns/f']);
    expect(asked.get('10.0.0.3')).toBeUndefined();
    pods.stop();
  });

  it('keeps the kubelet verdict once it called a pod Ready, though the pod answers', async () => {
    const { pods, told } = tracker();
    up.add('10.0.0.4');
    pods.observe(pod('d', '10.0.0.4', { ready: true }), false);
    pods.observe(pod('d', '10.0.0.4', { ready: false }), false);
    expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
    expect(told).toEqual(['ns/f', 'ns/f']);
    // Not asked: a probe would overrule the kubelet's.
    await new Promise((r) => setImmediate(r));
    expect(asked.get('10.0.0.4')).toBeUndefined();
    pods.stop();
  });

  it('leaves a pod past its startup probe to the kubelet: not asked while it is not Ready', async () => {
    const { pods, told, nextChange } = tracker();
    up.add('10.0.4.1');
    up.add('10.0.4.2');
    // First seen (a restarted controller) past its startup probe and not ready: the kubelet's call.
    pods.observe(pod('k', '10.0.4.1', { started: true }), false);
    // A pod still starting, seen after it: asked, and its answer is the signal both were handled.
    const answered = nextChange();
    pods.observe(pod('l', '10.0.4.2'), false);
    await answered;
    expect(pods.answering('ns', 'f', 'r2')).toEqual(['10.0.4.2']);
    expect(asked.get('10.0.4.1')).toBeUndefined();
    expect(told).toEqual(['ns/f']);
    // An answering pod stays while the kubelet passes it from startup into readiness probing.
    pods.observe(pod('l', '10.0.4.2', { started: true }), false);
    expect(pods.answering('ns', 'f', 'r2')).toEqual(['10.0.4.2']);
    pods.stop();
  });

  it('drops a pod that stops running, terminates, restarts or goes', async () => {
    for (const [i, next] of [
      (p: string, ip: string) => pod(p, ip, { running: false }),
      (p: string, ip: string) => pod(p, ip, { terminating: true }),
      (p: string, ip: string) => pod(p, ip, { restarts: 1 }),
    ].entries()) {
      const { pods, told, nextChange } = tracker();
      const ip = `10.0.1.${i}`;
      up.add(ip);
      const answered = nextChange();
      pods.observe(pod('e', ip), false);
      await answered;
      expect(pods.answering('ns', 'f', 'r2')).toEqual([ip]);
      up.delete(ip);
      pods.observe(next('e', ip), false);
      expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
      expect(told).toEqual(['ns/f', 'ns/f']);
      pods.stop();
    }
    const { pods, told } = tracker();
    pods.observe(pod('g', '10.0.2.1', { ready: true }), false);
    pods.observe(pod('g', '10.0.2.1', { ready: true }), true);
    expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
    expect(told).toEqual(['ns/f', 'ns/f']);
    pods.stop();
  });

  it('asks a restarted pod again until it answers', async () => {
    const { pods, nextChange } = tracker();
    const ip = '10.0.3.1';
    up.add(ip);
    let changed = nextChange();
    pods.observe(pod('h', ip), false);
    await changed;
    up.delete(ip);
    pods.observe(pod('h', ip, { restarts: 1 }), false);
    expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
    const before = asked.get(ip) ?? 0;
    while ((asked.get(ip) ?? 0) < before + 2) await new Promise((r) => setTimeout(r, 20));
    expect(pods.answering('ns', 'f', 'r2')).toEqual([]);
    changed = nextChange();
    up.add(ip);
    await changed;
    expect(pods.answering('ns', 'f', 'r2')).toEqual([ip]);
    pods.stop();
  });
});
