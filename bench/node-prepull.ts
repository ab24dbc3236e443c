// What pre-pulling (SLESS_PREPULL, deploy/components/prepull) saves on the real node (test/cluster/
// node.ts; root only): the first build and serve of a Node function on a node whose image store is
// empty, against the same on a node where the pre-pull DaemonSet has already pulled the kaniko image
// and the runtime's base (as on a node that joins a cluster whose functions use that runtime). Each
// run starts a fresh node, so nothing is cached between runs; the two kinds alternate, RUNS (default
// 2) each. Broken down into
//   build  the Job created → kaniko exited (pulls of the install and kaniko images, install, kaniko),
//   pod    the function pod created → its container started (the image pull: base layers and the
//          function's own),
//   total  commit → the body served.
// Run: npx tsx bench/node-prepull.ts

import { KANIKO_CONTAINER, LABEL_BUILD } from '../src/platform/kube/build/kaniko-job.js';
import { apply, getObject, type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { PREPULL_NAME, prepullDaemonSet, prepullImages } from '../src/platform/kube/prepull.js';
import { DAEMON_SET, JOB, POD } from '../src/platform/kube/resource-types.js';
import { callFunction, type E2eEnv, startE2e } from '../test/e2e/harness.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { median } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Row {
  total: number;
  build: number;
  pod: number;
  /** How long the DaemonSet took to pull everything first (pre-pulled runs only). */
  prepull: number;
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 600_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

async function prepulled(env: E2eEnv): Promise<number> {
  const started = Date.now();
  const settings = {
    controllerNamespace: env.controllerNs,
    ...(env.config.kanikoImage ? { kanikoImage: env.config.kanikoImage } : {}),
    registryMap: env.config.kanikoRegistryMap,
  };
  await apply(env.http, DAEMON_SET, prepullDaemonSet(settings, prepullImages(['nodejs20'], settings)));
  await until('the pre-pull DaemonSet ready', async () => {
    const ds = await getObject<KubeObject>(env.http, DAEMON_SET, env.controllerNs, PREPULL_NAME);
    const status = ds?.status as { numberReady?: number; desiredNumberScheduled?: number } | undefined;
    return (status?.desiredNumberScheduled ?? 0) > 0 && status?.numberReady === status?.desiredNumberScheduled
      ? true
      : undefined;
  });
  return Date.now() - started;
}

async function run(withPrepull: boolean): Promise<Row> {
  const env = await startE2e('prepull', { 'README.md': 'functions come later\n' });
  try {
    const prepull = withPrepull ? await prepulled(env) : Number.NaN;
    const start = Date.now();
    await env.commit({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'first';`),
    });
    await until('served', async () => {
      const [code, text] = await callFunction(env, 'hello');
      return code === 200 && text.includes('first') ? true : undefined;
    });
    const total = Date.now() - start;
    const job = (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'hello' },
      })
    ).items[0];
    const buildPod = (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.controllerNs,
        labels: { [LABEL_BUILD]: job?.metadata.name ?? '' },
      })
    ).items[0];
    const kaniko = (
      buildPod?.status as
        | { containerStatuses?: { name: string; state?: { terminated?: { finishedAt?: string } } }[] }
        | undefined
    )?.containerStatuses?.find((c) => c.name === KANIKO_CONTAINER)?.state?.terminated;
    const fnPod = (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': 'hello' },
      })
    ).items[0];
    const running = (
      fnPod?.status as { containerStatuses?: { state?: { running?: { startedAt?: string } } }[] } | undefined
    )?.containerStatuses?.[0]?.state?.running;
    return {
      total,
      build: Date.parse(kaniko?.finishedAt ?? '') - Date.parse(job?.metadata.creationTimestamp ?? ''),
      pod: Date.parse(running?.startedAt ?? '') - Date.parse(fnPod?.metadata.creationTimestamp ?? ''),
      prepull,
    };
  } finally {
    await env.close();
  }
}

async function main(): Promise<void> {
  const cold: Row[] = [];
  const warm: Row[] = [];
  for (let i = 1; i <= RUNS; i++) {
    cold.push(await run(false));
    process.stderr.write(`run ${i} fresh node:  ${JSON.stringify(cold.at(-1))}\n`);
    warm.push(await run(true));
    process.stderr.write(`run ${i} pre-pulled:  ${JSON.stringify(warm.at(-1))}\n`);
  }
  const s = (rows: Row[], k: keyof Row) => `${(median(rows.map((r) => r[k])) / 1000).toFixed(1)} s`;
  for (const [label, rows] of [
    ['fresh node', cold],
    ['pre-pulled', warm],
  ] as const)
    console.log(
      `${label}: first commit → served, median of ${RUNS}: ${s(rows, 'total')} (build ${s(rows, 'build')}, function pod start ${s(rows, 'pod')})`,
    );
  console.log(`the DaemonSet's own pulls beforehand: ${s(warm, 'prepull')}`);
  console.log(
    `pre-pulled / fresh, commit → served: ${(median(warm.map((r) => r.total)) / median(cold.map((r) => r.total))).toFixed(2)}`,
  );
  console.log('(timestamps from the API server have 1 s resolution)');
}

await main();
