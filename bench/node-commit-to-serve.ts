// Commit to serving on the real node (test/cluster/node.ts; root only): from `git commit` + push to the
// first /fn/ response with the new body, for a code-only change of a function without dependencies,
// through both build paths in the same run, alternating:
//   code layer  `hello` (Node, no package.json) and `snake` (Python, no requirements.txt): the
//               controller pushes the earlier image with a new code layer, no Job;
//   kaniko      `slow` (a package.json without a lock file, which the code-layer path refuses):
//               a kaniko Job, kaniko cache warm, as every code change was built before.
// Median of RUNS (default 5) each, broken down into
//   sync   commit → the build started (git fetch, manifests; for kaniko: the build context in S3 and
//          the Job created),
//   build  the build started → the image is in the registry (kaniko: pod scheduled, install step,
//          kaniko started, base unpacked, built, pushed; code layer: the layer made and pushed),
//   pull   new function pod created → its container started (scheduling, the kubelet's image pull,
//          container start),
//   ready  container started → the new body is served through /fn/ (the pod answering /healthz when
//          asked by the controller and the proxy, the controller's status).
// and, on further lines for kaniko, parts the four leave out or lump together:
//   notice kaniko exited → new function pod created (the controller sees the build, rolls the Deployment),
//   probe  container started → the kubelet calls the pod Ready (its probes; /fn/ no longer waits for
//          this, so it may be longer than "ready"),
//   kaniko kaniko's container started → exited (the part of "build" kaniko itself takes),
//   before the Job created → the build pod's first container started (the Job controller, the
//          scheduler, the kubelet's sandbox and volumes),
//   install the install step's container started → exited (context download, unpack, npm install),
//   sanitize sless's sanitize step started → exited,
//   gaps   between those containers: one exited → the next started (the kubelet's own pace),
//   complete kaniko exited → the Job controller marks the Job Complete (the controller no longer
//          waits for it: it reads the digest from the kaniko container's termination message).
// Also: the node fixture's start time and the first builds (kaniko cache cold) of this run.
// Run: npx tsx bench/node-commit-to-serve.ts
import { CodeLayerRecords } from '../src/platform/kube/build/code-layer-records.js';
import {
  INSTALL_CONTAINER,
  KANIKO_CONTAINER,
  LABEL_BUILD,
  SANITIZE_CONTAINER,
} from '../src/platform/kube/build/kaniko-job.js';
import { getObject, type KubeObject, listObjects } from '../src/platform/kube/objects.js';
import { JOB, POD } from '../src/platform/kube/resource-types.js';
import { callFunction, type E2eEnv, startE2e } from '../test/e2e/harness.ts';
import { functionManifest, nodeHandler } from '../test/helpers/git.js';
import { median } from './stats.js';

const RUNS = Number(process.env.RUNS ?? 5);

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
}

interface Row {
  total: number;
  sync: number;
  build: number;
  pull: number;
  ready: number;
  notice: number;
  probe: number;
  kaniko: number;
  complete: number;
  before: number;
  install: number;
  sanitize: number;
  gaps: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function served(env: E2eEnv, name: string, body: string, deadlineMs = 600_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const [code, text] = await callFunction(env, name).catch(() => [0, ''] as const);
    if (code === 200 && text.includes(body)) return;
    if (Date.now() > deadline) throw new Error(`${name}: "${body}" not served`);
    await sleep(50);
  }
}

/**
 * The newest function pod's times: created, container started, and when the kubelet called it Ready,
 * which /fn/ no longer waits for (the pod is asked itself), so it may come after the body was served.
 */
async function podTimes(env: E2eEnv, name: string) {
  for (let tries = 0; ; tries++) {
    const pods = (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': name },
      })
    ).items.sort((a, b) =>
      (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? ''),
    );
    const pod = pods[0];
    const status = pod?.status as
      | { containerStatuses?: { state?: { running?: { startedAt?: string } } }[]; conditions?: Condition[] }
      | undefined;
    const times = {
      created: Date.parse(pod?.metadata.creationTimestamp ?? ''),
      started: Date.parse(status?.containerStatuses?.[0]?.state?.running?.startedAt ?? ''),
      ready: Date.parse(
        status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True')?.lastTransitionTime ?? '',
      ),
    };
    if (!Number.isNaN(times.ready) || tries >= 40) return times;
    await sleep(250);
  }
}

/** A function the code-layer path builds: its handler file and the body a version answers. */
interface CodeLayerTarget {
  name: string;
  file: string;
  handler: (version: string) => string;
}

const NODE_TARGET: CodeLayerTarget = {
  name: 'hello',
  file: 'hello/handler.js',
  handler: (version) => nodeHandler(`return '${version}';`),
};
const PYTHON_TARGET: CodeLayerTarget = {
  name: 'snake',
  file: 'snake/handler.py',
  handler: (version) => `def handle(event, context):\n    return "${version}"\n`,
};

/** One code-only commit of `target`, built as a code layer (no Job). */
async function codeLayerRun(
  env: E2eEnv,
  records: CodeLayerRecords,
  target: CodeLayerTarget,
  i: number,
): Promise<Row> {
  const start = Date.now();
  const version = `${target.name}-v${i}`;
  const sha = await env.commit({ [target.file]: target.handler(version) });
  await served(env, target.name, version);
  const end = Date.now();
  const record = (await records.list({ namespace: env.ns, name: target.name })).find((r) => r.commit === sha);
  if (!record) throw new Error(`${target.name}@${sha}: built without the code-layer path (no record)`);
  const began = Date.parse(record.startedAt);
  const pushed = Date.parse(record.builtAt);
  const pod = await podTimes(env, target.name);
  return {
    total: end - start,
    sync: began - start,
    build: pushed - began,
    pull: pod.started - pod.created,
    ready: end - pod.started,
    notice: pod.created - pushed,
    probe: pod.ready - pod.started,
    kaniko: Number.NaN,
    complete: Number.NaN,
    before: Number.NaN,
    install: Number.NaN,
    sanitize: Number.NaN,
    gaps: Number.NaN,
  };
}

/** One code-only commit of `slow`, which the code-layer path refuses: a kaniko Job. */
async function kanikoRun(env: E2eEnv, i: number): Promise<Row> {
  const start = Date.now();
  const sha = await env.commit({ 'slow/handler.js': nodeHandler(`return 's${i}';`) });
  await served(env, 'slow', `s${i}`);
  const end = Date.now();
  const job = (
    await listObjects<KubeObject>(env.http, JOB, {
      namespace: env.controllerNs,
      labels: { 'sless.dev/function': 'slow' },
    })
  ).items.find((j) => j.metadata.name === `build-slow-${sha.slice(0, 12)}`);
  if (!job) throw new Error(`slow@${sha}: no kaniko Job`);
  // The Job controller may mark the Job Complete after the new body is served: wait for it.
  let jobStatus: { completionTime?: string; conditions?: Condition[] } | undefined;
  for (let tries = 0; tries < 120 && !jobStatus?.completionTime; tries++) {
    if (tries > 0) await sleep(500);
    jobStatus = (await getObject<KubeObject>(env.http, JOB, env.controllerNs, job.metadata.name))
      ?.status as typeof jobStatus;
  }
  const jobCreated = Date.parse(job.metadata.creationTimestamp ?? '');
  const jobDone = Date.parse(
    jobStatus?.completionTime ??
      jobStatus?.conditions?.find((c) => c.type === 'Complete')?.lastTransitionTime ??
      '',
  );
  const buildPod = (
    await listObjects<KubeObject>(env.http, POD, {
      namespace: env.controllerNs,
      labels: { [LABEL_BUILD]: job.metadata.name },
    })
  ).items[0];
  interface Terminated {
    name: string;
    state?: { terminated?: { startedAt?: string; finishedAt?: string } };
  }
  const podStatus = buildPod?.status as
    | { initContainerStatuses?: Terminated[]; containerStatuses?: Terminated[] }
    | undefined;
  const ran = (statuses: Terminated[] | undefined, name: string) => {
    const terminated = statuses?.find((c) => c.name === name)?.state?.terminated;
    return {
      started: Date.parse(terminated?.startedAt ?? ''),
      finished: Date.parse(terminated?.finishedAt ?? ''),
    };
  };
  const install = ran(podStatus?.initContainerStatuses, INSTALL_CONTAINER);
  const sanitize = ran(podStatus?.initContainerStatuses, SANITIZE_CONTAINER);
  const kaniko = podStatus?.containerStatuses?.find((c) => c.name === KANIKO_CONTAINER)?.state?.terminated;
  const kanikoStarted = Date.parse(kaniko?.startedAt ?? '');
  const pushed = Date.parse(kaniko?.finishedAt ?? '');
  const pod = await podTimes(env, 'slow');
  return {
    total: end - start,
    sync: jobCreated - start,
    build: pushed - jobCreated,
    pull: pod.started - pod.created,
    ready: end - pod.started,
    notice: pod.created - pushed,
    probe: pod.ready - pod.started,
    kaniko: pushed - kanikoStarted,
    complete: jobDone - pushed,
    before: install.started - jobCreated,
    install: install.finished - install.started,
    sanitize: sanitize.finished - sanitize.started,
    gaps: sanitize.started - install.finished + (kanikoStarted - sanitize.finished),
  };
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const env = await startE2e('bench', {
    'hello/function.yaml': functionManifest('hello'),
    [NODE_TARGET.file]: NODE_TARGET.handler('hello-v0'),
    'snake/function.yaml': functionManifest('snake', { runtime: 'python3.11', entrypoint: 'handler.handle' }),
    [PYTHON_TARGET.file]: PYTHON_TARGET.handler('snake-v0'),
    // No lock file: each install may resolve other versions, so every build of it goes to kaniko.
    'slow/function.yaml': functionManifest('slow'),
    'slow/package.json': '{"name":"slow","version":"1.0.0"}\n',
    'slow/handler.js': nodeHandler(`return 's0';`),
  });
  const startMs = performance.now() - t0;
  const firstMs = performance.now();
  await Promise.all([
    served(env, 'hello', 'hello-v0'),
    served(env, 'snake', 'snake-v0'),
    served(env, 'slow', 's0'),
  ]);
  const firstServe = performance.now() - firstMs;

  const records = new CodeLayerRecords(env.http, env.controllerNs);
  const fast: Row[] = [];
  const python: Row[] = [];
  const slow: Row[] = [];
  for (let i = 1; i <= RUNS; i++) {
    // Alternating, so that a machine busier in one half of the run weighs on both paths alike.
    fast.push(await codeLayerRun(env, records, NODE_TARGET, i));
    process.stderr.write(`run ${i} code layer: ${JSON.stringify(fast.at(-1))}\n`);
    python.push(await codeLayerRun(env, records, PYTHON_TARGET, i));
    process.stderr.write(`run ${i} python:     ${JSON.stringify(python.at(-1))}\n`);
    slow.push(await kanikoRun(env, i));
    process.stderr.write(`run ${i} kaniko:     ${JSON.stringify(slow.at(-1))}\n`);
  }
  await env.close();

  const med = (rows: Row[], k: keyof Row) => median(rows.map((r) => r[k]));
  const col = (rows: Row[], k: keyof Row) => `${(med(rows, k) / 1000).toFixed(1)} s`;
  console.log(`node fixture start (this run):                    ${(startMs / 1000).toFixed(1)} s`);
  console.log(`first builds and serves, all three with kaniko:    ${(firstServe / 1000).toFixed(1)} s`);
  for (const [label, rows] of [
    ['code layer (no Job)', fast],
    ['code layer, Python (no Job)', python],
    ['kaniko Job', slow],
  ] as const) {
    console.log(`${label}: commit → new body served, median of ${RUNS}: ${col(rows, 'total')}`);
    console.log(
      `  sync ${col(rows, 'sync')}, build ${col(rows, 'build')}, pull ${col(rows, 'pull')}, ready ${col(rows, 'ready')}`,
    );
    console.log(
      `  (notice ${col(rows, 'notice')} between build and pull; the kubelet's Ready ${col(rows, 'probe')} after the container started)`,
    );
  }
  console.log(
    `  (kaniko ${col(slow, 'kaniko')} of build; the Job marked Complete ${col(slow, 'complete')} after kaniko exited)`,
  );
  console.log(
    `  (build: before the pod's first container ${col(slow, 'before')}, install ${col(slow, 'install')}, sanitize ${col(slow, 'sanitize')}, gaps between containers ${col(slow, 'gaps')}, kaniko ${col(slow, 'kaniko')})`,
  );
  console.log(
    `code layer / kaniko, commit → served: ${(med(fast, 'total') / med(slow, 'total')).toFixed(2)}; build alone: ${(med(fast, 'build') / med(slow, 'build')).toFixed(2)}`,
  );
  console.log('(timestamps from the API server have 1 s resolution; the parts need not add up exactly)');
}

await main();
