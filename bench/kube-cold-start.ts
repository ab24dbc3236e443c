// Cold start from zero through /fn/ on the real node (test/cluster/node.ts; root only), per runtime:
// a function at 0 replicas gets one request through the controller's /fn/ proxy, which holds it,
// scales the Deployment up and sends it on once an endpoint is ready. Median of RUNS (default 5),
// broken into
//   scale-up    request sent → the Deployment's replicas are 1 (the activator's scale-subresource write),
//   pod start   replicas 1 → the pod's containers run (scheduling, sandbox and container start),
//   first byte  containers running → the response's first byte (the runtime loading the handler, the
//               activator finding it answers /healthz, the proxy). The kubelet's Ready comes later:
//               the activator asks the pod itself and does not wait for it.
// Baseline in the same run: a warm request to the same function (median of RUNS). Between runs the
// function is put back to 0 through the scale subresource, as the idle scale-down does, and the old
// pod is waited out. The node starts with its extra images (the Go runtime's bases come from the
// toolchain the Go module proxy serves), so Go is built and measured like the others.
// Run: npx tsx bench/kube-cold-start.ts

import { MERGE_PATCH } from '../src/platform/kube/http.js';
import { type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { DEPLOYMENT, objectPath, POD } from '../src/platform/kube/resource-types.js';
import { callFunction, startE2e } from '../test/e2e/harness.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { report } from './report.ts';
import { median } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 5);
const TARGET_NODE_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const FUNCTIONS: Record<string, Record<string, string>> = {
  'cold-node': {
    'cold-node/function.yaml': functionManifest('cold-node', { scaleToZero: { idleSeconds: 3600 } }),
    'cold-node/handler.js': nodeHandler(`return 'node';`),
  },
  'cold-python': {
    'cold-python/function.yaml': functionManifest('cold-python', {
      runtime: 'python3.11',
      scaleToZero: { idleSeconds: 3600 },
    }),
    'cold-python/handler.py': `def handle(event, context):\n    return "python"\n`,
  },
  'cold-go': {
    'cold-go/function.yaml': functionManifest('cold-go', {
      runtime: 'go1.21',
      entrypoint: 'handler.Handle',
      scaleToZero: { idleSeconds: 3600 },
    }),
    'cold-go/handler.go': `package handler

import (
\t"context"

\tsless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
\treturn "go", nil
}
`,
  },
};
interface Sample {
  total: number;
  scaleUp: number;
  podStart: number;
  firstByte: number;
}

async function main(): Promise<void> {
  const env = await startE2e('coldbench', Object.assign({}, ...Object.values(FUNCTIONS)), { extras: true });
  const replicas = async (name: string) =>
    (
      (await env.http.request<KubeObject>('GET', objectPath(DEPLOYMENT, env.ns, name))).spec as {
        replicas?: number;
      }
    ).replicas ?? 1;
  const pods = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': name },
      })
    ).items;
  const podRunning = (pod: KubeObject) => {
    const statuses =
      (pod.status as { containerStatuses?: { state?: { running?: unknown } }[] } | undefined)
        ?.containerStatuses ?? [];
    return statuses.length > 0 && statuses.every((c) => c.state?.running);
  };
  const toZero = async (name: string) => {
    await env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, name, 'scale'), {
      query: { fieldManager: 'sless-scaler' },
      contentType: MERGE_PATCH,
      body: { spec: { replicas: 0 } },
    });
    while ((await pods(name)).length > 0) await sleep(200);
  };
  const names = Object.keys(FUNCTIONS);
  const samples = new Map<string, Sample[]>(names.map((name) => [name, []]));
  const warm = new Map<string, number[]>(names.map((name) => [name, []]));
  /** One cold request from zero and one warm request after it. */
  const measure = async (name: string, run: number) => {
    await toZero(name);
    let scaledAt = 0;
    let runningAt = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const now = performance.now();
        if (!scaledAt && (await replicas(name).catch(() => 0)) > 0) scaledAt = now;
        if (scaledAt && !runningAt && (await pods(name).catch(() => [])).some(podRunning)) runningAt = now;
        await sleep(20);
      }
    })();
    const sent = performance.now();
    const response = await fetch(`${env.system.url}/fn/${env.ns}/${name}/`, {
      signal: AbortSignal.timeout(120_000),
    });
    const firstByte = performance.now();
    const body = await response.text();
    watching = false;
    await watcher;
    if (response.status !== 200 || body !== JSON.stringify(name.replace('cold-', '')))
      throw new Error(`${name}: cold request answered ${response.status} ${body.slice(0, 200)}`);
    // Under load the 20 ms poll can miss a moment (the answer came before the poll saw the
    // containers run): that run's parts are unknown and left out of their medians; its total counts.
    const sample = {
      total: firstByte - sent,
      scaleUp: scaledAt ? scaledAt - sent : Number.NaN,
      podStart: scaledAt && runningAt ? runningAt - scaledAt : Number.NaN,
      firstByte: runningAt ? firstByte - runningAt : Number.NaN,
    };
    samples.get(name)?.push(sample);
    const warmSent = performance.now();
    await (await fetch(`${env.system.url}/fn/${env.ns}/${name}/`)).text();
    const warmMs = performance.now() - warmSent;
    warm.get(name)?.push(warmMs);
    process.stderr.write(`${name} run ${run}: ${JSON.stringify(sample)} warm ${warmMs.toFixed(1)} ms\n`);
  };
  try {
    for (const name of names) {
      const deadline = Date.now() + 15 * 60_000;
      for (;;) {
        const [code] = await callFunction(env, name).catch(() => [0] as const);
        if (code === 200) break;
        if (Date.now() > deadline) throw new Error(`${name} never served`);
        await sleep(1000);
      }
    }
    // Runs alternate between the runtimes, so a burst of load on the machine falls on all of them.
    for (let run = 1; run <= RUNS; run++) for (const name of names) await measure(name, run);
    for (const name of names) {
      const all = samples.get(name) ?? [];
      const col = (k: keyof Sample) => median(all.map((s) => s[k]).filter((v) => !Number.isNaN(v)));
      const total = col('total');
      const warmMedian = median(warm.get(name) ?? []);
      const line = `cold start ${(total / 1000).toFixed(2)} s (scale-up ${col('scaleUp').toFixed(0)} ms, pod start ${col('podStart').toFixed(0)} ms, first byte ${col('firstByte').toFixed(0)} ms), warm ${warmMedian.toFixed(1)} ms`;
      console.log(`${name}: ${line}, median of ${RUNS}`);
      report({
        bench: 'kube-cold-start',
        measure: `${name} from zero through /fn/ (scale-up ${col('scaleUp').toFixed(0)} ms, pod start ${col('podStart').toFixed(0)} ms, first byte ${col('firstByte').toFixed(0)} ms)`,
        value: `${(total / 1000).toFixed(2)} s`,
        baseline: `warm request ${warmMedian.toFixed(1)} ms`,
        ratio: total / warmMedian,
        ...(name === 'cold-node' ? { target: '< 3 s', met: total < TARGET_NODE_MS } : {}),
      });
    }
  } finally {
    await env.close();
  }
}

await main();
