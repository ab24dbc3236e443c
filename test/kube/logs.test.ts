/**
 * Function logs on kube, as far as the apiserver fixture goes: it has no kubelet and no scheduler, so
 * pods are created through the API and never run. What is tested here: the function's pods (all
 * replicas, no other function's, no FunctionJob pods) are found by label; each is asked through the
 * real `pods/log` endpoint, which for a pod bound to a Node turns our options into the kubelet's
 * `/containerLogs/...` URL (the Node here points at a closed port, so the apiserver reports that URL
 * in its error); an unscheduled pod has no logs; each answer comes back tagged with its pod name
 * without failing the others. Streaming real container output needs the real node (issue 9's suite);
 * the kubelet's line format is checked with parseLogLine.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogLine } from '../../src/core/logs.js';
import { KubeFunctionLogs, parseLogLine } from '../../src/platform/kube/function-logs.js';
import { type KubeEnv, kubeEnv } from './harness.js';

async function collect(lines: AsyncIterable<LogLine>): Promise<LogLine[]> {
  const out: LogLine[] = [];
  for await (const l of lines) out.push(l);
  return out;
}

describe('kube function logs (apiserver without a kubelet)', () => {
  let env: KubeEnv;
  let logs: KubeFunctionLogs;

  let kubeletPort: number;
  const node = `logs-node-${Date.now().toString(36)}`;
  const pod = (name: string, labels: Record<string, string>, nodeName?: string) =>
    env.http.request('POST', `/api/v1/namespaces/${env.ns}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, labels },
        spec: {
          ...(nodeName ? { nodeName } : {}),
          containers: [{ name: 'function', image: 'registry.test/fn@sha256:'.padEnd(96, '0') }],
        },
      },
    });

  beforeAll(async () => {
    env = await kubeEnv('logs');
    logs = new KubeFunctionLogs({ http: env.http });
    // A Node whose kubelet port has nothing listening (a port that was just free).
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    kubeletPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await env.http.request('POST', '/api/v1/nodes', {
      body: { apiVersion: 'v1', kind: 'Node', metadata: { name: node } },
    });
    await env.http.request('PATCH', `/api/v1/nodes/${node}/status`, {
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
          daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } },
        },
      },
    });
    const fnLabels = (name: string) => ({
      'app.kubernetes.io/component': 'function',
      'sless.dev/function': name,
    });
    await pod('alpha-7d9f-b', fnLabels('alpha'), node);
    await pod('alpha-7d9f-a', fnLabels('alpha'));
    await pod('beta-5c4d-a', fnLabels('beta'));
    await pod('run-alpha-once-1-x', { 'app.kubernetes.io/component': 'run', 'sless.dev/function': 'alpha' });
  });

  afterAll(async () => {
    await env?.http.request('DELETE', `/api/v1/nodes/${node}`).catch(() => undefined);
    await env?.close();
  });

  it('finds every replica of the function and only those', async () => {
    expect(await logs.pods(env.ns, 'alpha')).toEqual(['alpha-7d9f-a', 'alpha-7d9f-b']);
    expect(await logs.pods(env.ns, 'gamma')).toEqual([]);
  });

  it('asks pods/log of each replica and tags each answer with the pod name', async () => {
    const lines = await collect(
      logs.read(env.ns, 'alpha', { tail: 10, follow: false, signal: new AbortController().signal }),
    );
    // alpha-7d9f-a is not scheduled: no logs. alpha-7d9f-b is on the Node: the apiserver called its
    // kubelet with our options, and says so.
    expect(lines.map((l) => l.instance)).toEqual(['alpha-7d9f-b']);
    const kubeletUrl = `https://127.0.0.1:${kubeletPort}/containerLogs/${env.ns}/alpha-7d9f-b/function?tailLines=10&timestamps=true`;
    expect(lines[0]?.line).toContain('[sless] ');
    expect(lines[0]?.line).toContain(kubeletUrl);
    expect(lines[0]?.line).toContain('connection refused');
    const followed = await collect(
      logs.read(env.ns, 'alpha', { tail: 5, follow: true, signal: new AbortController().signal }),
    );
    expect(followed.map((l) => l.instance)).toEqual(['alpha-7d9f-b']);
    expect(followed[0]?.line).toContain(
      `https://127.0.0.1:${kubeletPort}/containerLogs/${env.ns}/alpha-7d9f-b/function?follow=true&tailLines=5&timestamps=true`,
    );
  });

  it('reads the kubelet line format (timestamps=true)', () => {
    expect(parseLogLine('p-1', '2026-11-30T10:00:00.123456789Z hello world')).toEqual({
      time: '2026-11-30T10:00:00.123456789Z',
      instance: 'p-1',
      stream: 'output',
      line: 'hello world',
    });
    expect(parseLogLine('p-1', 'no timestamp').line).toBe('no timestamp');
  });
});
