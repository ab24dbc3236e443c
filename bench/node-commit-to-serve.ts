// Commit to serving on the real node (test/cluster/node.ts; root only): from `git commit` + push to the
// first /fn/ response with the new body, for a Node function without dependencies, kaniko cache warm.
// Median of RUNS (default 5), broken down into
//   sync   commit → the build Job exists (git fetch, manifests, build context to S3, Job created),
//   build  Job created → kaniko's container exited (pod scheduled, install step, kaniko started,
//          base unpacked, built, pushed: the image is in the registry),
//   pull   new function pod created → its container started (scheduling, the kubelet's image pull,
//          container start),
//   ready  container started → the new body is served through /fn/ (readiness probe, endpoints,
//          kube-proxy, the controller's status).
// and, on further lines, parts the four leave out or lump together:
//   notice kaniko exited → new function pod created (the controller sees the build, rolls the Deployment),
//   probe  container started → the pod's Ready condition (the part of "ready" the probes decide),
//   kaniko kaniko's container started → exited (the part of "build" kaniko itself takes),
//   complete kaniko exited → the Job controller marks the Job Complete (the controller no longer
//          waits for it: it reads the digest from the kaniko container's termination message).
// Also: the node fixture's start time and the first build (kaniko cache cold) of this run.
// Run: npx tsx bench/node-commit-to-serve.ts
import { KANIKO_CONTAINER, LABEL_BUILD } from '../src/platform/kube/build/kaniko-job.js';
import { getObject, type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { JOB, POD } from '../src/platform/kube/resource-types.js';
import { callFunction, startE2e } from '../test/e2e/harness.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { median } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 5);

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const t0 = performance.now();
  const env = await startE2e('bench', {
    'hello/function.yaml': functionManifest('hello'),
    'hello/handler.js': nodeHandler(`return 'v0';`),
  });
  const startMs = performance.now() - t0;
  const served = async (body: string, deadlineMs = 600_000) => {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const [code, text] = await callFunction(env, 'hello').catch(() => [0, ''] as const);
      if (code === 200 && text.includes(body)) return;
      if (Date.now() > deadline) throw new Error(`"${body}" not served`);
      await sleep(50);
    }
  };
  const firstMs = performance.now();
  await served('v0');
  const firstServe = performance.now() - firstMs;

  const rows: {
    total: number;
    sync: number;
    build: number;
    pull: number;
    ready: number;
    notice: number;
    probe: number;
    kaniko: number;
    complete: number;
  }[] = [];
  for (let i = 1; i <= RUNS; i++) {
    const start = Date.now();
    const sha = await env.commit({ 'hello/handler.js': nodeHandler(`return 'v${i}';`) });
    await served(`v${i}`);
    const end = Date.now();
    const job = (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': 'hello' },
      })
    ).items.find((j) => j.metadata.name === `build-hello-${sha.slice(0, 12)}`);
    // The Job controller may mark the Job Complete after the new body is served: wait for it.
    let jobStatus: { completionTime?: string; conditions?: Condition[] } | undefined;
    for (let tries = 0; tries < 120 && !jobStatus?.completionTime; tries++) {
      if (tries > 0) await sleep(500);
      jobStatus = (await getObject<KubeObject>(env.http, JOB, env.controllerNs, job?.metadata.name ?? ''))
        ?.status as typeof jobStatus;
    }
    const jobCreated = Date.parse(job?.metadata.creationTimestamp ?? '');
    const jobDone = Date.parse(
      jobStatus?.completionTime ??
        jobStatus?.conditions?.find((c) => c.type === 'Complete')?.lastTransitionTime ??
        '',
    );
    const buildPod = (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.controllerNs,
        labels: { [LABEL_BUILD]: job?.metadata.name ?? '' },
      })
    ).items[0];
    const kaniko = (
      buildPod?.status as
        | {
            containerStatuses?: {
              name: string;
              state?: { terminated?: { startedAt?: string; finishedAt?: string } };
            }[];
          }
        | undefined
    )?.containerStatuses?.find((c) => c.name === KANIKO_CONTAINER)?.state?.terminated;
    const kanikoStarted = Date.parse(kaniko?.startedAt ?? '');
    const pushed = Date.parse(kaniko?.finishedAt ?? '');
    const pods = (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': 'hello' },
      })
    ).items.sort((a, b) =>
      (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? ''),
    );
    const pod = pods[0];
    const podCreated = Date.parse(pod?.metadata.creationTimestamp ?? '');
    const podStatus = pod?.status as
      | { containerStatuses?: { state?: { running?: { startedAt?: string } } }[]; conditions?: Condition[] }
      | undefined;
    const started = Date.parse(podStatus?.containerStatuses?.[0]?.state?.running?.startedAt ?? '');
    const podReady = Date.parse(
      podStatus?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True')?.lastTransitionTime ?? '',
    );
    rows.push({
      total: end - start,
      sync: jobCreated - start,
      build: pushed - jobCreated,
      pull: started - podCreated,
      ready: end - started,
      notice: podCreated - pushed,
      probe: podReady - started,
      kaniko: pushed - kanikoStarted,
      complete: jobDone - pushed,
    });
    process.stderr.write(`run ${i}: ${JSON.stringify(rows.at(-1))}\n`);
  }
  await env.close();

  const col = (k: keyof (typeof rows)[number]) => `${(median(rows.map((r) => r[k])) / 1000).toFixed(1)} s`;
  console.log(`node fixture start (this run):        ${(startMs / 1000).toFixed(1)} s`);
  console.log(`first build and serve (cold cache):   ${(firstServe / 1000).toFixed(1)} s`);
  console.log(`commit → new body served, median of ${RUNS}: ${col('total')}`);
  console.log(`  sync ${col('sync')}, build ${col('build')}, pull ${col('pull')}, ready ${col('ready')}`);
  console.log(`  (notice ${col('notice')} between build and pull; probe ${col('probe')} of ready)`);
  console.log(
    `  (kaniko ${col('kaniko')} of build; the Job marked Complete ${col('complete')} after kaniko exited)`,
  );
  console.log('(timestamps from the API server have 1 s resolution; the parts need not add up exactly)');
}

await main();
