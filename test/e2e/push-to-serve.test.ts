/**
 * From `git push` to `/fn/` on a real node: kaniko Jobs really build and push the images (and the
 * controller itself the image of a code-only change, as a code layer), the kubelet really pulls and
 * runs them, kube-proxy really routes the ClusterIP; a pin rolls back to an earlier commit's image
 * without a build. Nothing is played by the test. Needs root (see
 * test/cluster/node.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus } from '../../src/core/resources.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, JOB, POD } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, nodeHandler } from '../helpers/git.js';
import { pullTestImage, type TarEntry, tarEntries } from '../helpers/oci-registry.js';
import { eventually, specOf } from '../kube/harness.js';
import {
  callFunction,
  type E2eEnv,
  registryDigest,
  servedBody as servedBodyOf,
  startE2e,
} from './harness.ts';
import { startPypiMirror } from './package-mirror.ts';

const BUILD_MS = 10 * 60_000;

const pythonHandler = (body: string) => `def handle(event, context):\n    return ${body}\n`;

describe('e2e on a real node: push to serve', () => {
  let env: E2eEnv;
  let first = '';

  const fn = async (name: string) => await env.system.store.get('Function', env.ns, name);
  const status = async (name: string) => (await fn(name))?.status as FunctionStatus | undefined;
  const buildJobs = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, JOB, {
        namespace: env.controllerNs,
        labels: { 'sless.dev/function': name, 'sless.dev/function-namespace': env.ns },
      })
    ).items;
  const replicaSets = async (name: string) =>
    (
      await listObjects<KubeObject>(
        env.http,
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', plural: 'replicasets', namespaced: true },
        { namespace: env.ns, labels: { 'sless.dev/function': name } },
      )
    ).items;
  const pods = async (name: string) =>
    (
      await listObjects<KubeObject>(env.http, POD, {
        namespace: env.ns,
        labels: { 'sless.dev/function': name },
      })
    ).items;
  const servedBody = (name: string, expected: string) => servedBodyOf(env, name, expected, BUILD_MS);

  /**
   * What the cluster says about a function, for a wait that timed out: its status, its build Jobs and
   * its pods. Bounded in time and never throwing, since the API server may be what stopped answering.
   */
  const diagnosis = async (name: string): Promise<string> => {
    type Described = KubeObject & { status?: Record<string, unknown> };
    const gather = async () => {
      const s = await status(name);
      const ready = s?.conditions?.find((c) => c.type === 'Ready');
      const jobs = (await buildJobs(name)) as Described[];
      const podList = (await pods(name)) as Described[];
      return [
        `status: ${s?.phase} Ready=${ready?.status} ${ready?.reason}: ${ready?.message}; lastBuild ${JSON.stringify(s?.lastBuild)}`,
        ...jobs.map((j) => {
          const { active, succeeded, failed, conditions } = (j.status ?? {}) as {
            active?: number;
            succeeded?: number;
            failed?: number;
            conditions?: { type: string; status: string }[];
          };
          const held = conditions?.filter((c) => c.status === 'True').map((c) => c.type);
          return `job ${j.metadata.name}: active ${active ?? 0}, succeeded ${succeeded ?? 0}, failed ${failed ?? 0}, ${held?.join(',') || 'no condition'}`;
        }),
        ...podList.map(
          (p) =>
            `pod ${p.metadata.name}: ${p.status?.phase} ${JSON.stringify(
              (p.status?.containerStatuses as { state?: unknown }[] | undefined)?.map((c) => c.state),
            )}`,
        ),
      ].join('\n  ');
    };
    const timeout = new Promise<string>((resolve) =>
      setTimeout(() => resolve('the API server did not answer within 10 s'), 10_000).unref(),
    );
    return Promise.race([
      gather().catch((error: Error) => `cannot read the cluster: ${error.message}`),
      timeout,
    ]);
  };

  beforeAll(async () => {
    env = await startE2e('e2e', {
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'hello from node v1';`),
      'snake/function.yaml': functionManifest('snake', {
        runtime: 'python3.11',
        entrypoint: 'handler.handle',
      }),
      'snake/handler.py': pythonHandler(`"hello from python v1"`),
    });
    first = await git(env.repo.dir, 'rev-parse', 'HEAD');
  }, 15 * 60_000);

  afterAll(async () => {
    await env?.close();
  }, 300_000);

  it(
    'builds each function with kaniko, pins the Deployment to the digest the registry reports, and serves it at /fn/',
    async () => {
      expect(await servedBody('hello', 'hello from node v1')).toContain('hello from node v1');
      expect(await servedBody('snake', 'hello from python v1')).toContain('hello from python v1');
      for (const name of ['hello', 'snake']) {
        const repository = `${env.ns}-${name}`;
        const digest = await registryDigest(env.node, repository, first);
        expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
        const deployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
        const image = specOf<{ template: { spec: { containers: { image: string }[] } } }>(deployment).template
          .spec.containers[0]?.image;
        expect(image).toBe(`${env.node.registryHost}/${repository}:${first}@${digest}`);
        expect((await status(name))?.lastBuild).toMatchObject({ result: 'Succeeded', commit: first });
        const jobs = await buildJobs(name);
        expect(jobs.map((j) => j.metadata.name)).toEqual([`build-${name}-${first.slice(0, 12)}`]);
      }
    },
    BUILD_MS * 2,
  );

  it(
    'a code-only change is built by the controller as a code layer, with no kaniko Job, serves as the kaniko-built image did, and one new ReplicaSet rolls; the other function is untouched and a bounded load sees no failure',
    async () => {
      const snakePods = (await pods('snake')).map((p) => p.metadata.uid).sort();
      const helloSets = (await replicaSets('hello')).map((r) => r.metadata.name);
      const snakeSets = (await replicaSets('snake')).map((r) => r.metadata.name).sort();
      expect(helloSets).toHaveLength(1);

      const second = await env.commit({ 'hello/handler.js': nodeHandler(`return 'hello from node v2';`) });
      // Bounded load through /fn/ while kaniko builds and the Deployment rolls.
      const failures: string[] = [];
      let requests = 0;
      let rolled = false;
      const load = (async () => {
        while (!rolled) {
          const [code, body] = await callFunction(env, 'hello').catch((e: Error) => [0, e.message] as const);
          requests++;
          if (code !== 200) failures.push(`${code} ${body}`);
          else if (body.includes('v2')) rolled = true;
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      await eventually('hello v2 served', async () => rolled || undefined, BUILD_MS).catch(
        async (error: Error) => {
          rolled = true; // ends the load loop
          throw new Error(
            `${error.message}; last load failures: ${JSON.stringify(failures.slice(-3))}\n  ${await diagnosis('hello')}`,
          );
        },
      );
      await load;
      expect(failures).toEqual([]);
      expect(requests).toBeGreaterThan(1);

      // No Job for the code-only change: the record of the controller's own build, and its image.
      expect((await buildJobs('hello')).map((j) => j.metadata.name)).toEqual([
        `build-hello-${first.slice(0, 12)}`,
      ]);
      expect(await buildJobs('snake')).toHaveLength(1);
      const built = (await status('hello'))?.lastBuild;
      expect(built).toMatchObject({ result: 'Succeeded', commit: second });
      expect(built?.message).toMatch(/^code layer on .*:[0-9a-f]{40}@sha256:[0-9a-f]{64}, no Job$/);
      const repository = `${env.ns}-hello`;
      const digest = await registryDigest(env.node, repository, second);
      const deployment = await getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, 'hello');
      expect(
        specOf<{ template: { spec: { containers: { image: string }[] } } }>(deployment).template.spec
          .containers[0]?.image,
      ).toBe(`${env.node.registryHost}/${repository}:${second}@${digest}`);

      // The image against the one kaniko built at the first commit: the same config (entrypoint,
      // env, workdir, user, labels), the same layers below the code, and a code layer with the same
      // entries (paths, types, modes, owners) where only the changed file's content differs.
      const kaniko = await pullTestImage(env.node.registry.url, repository, first);
      const fast = await pullTestImage(env.node.registry.url, repository, second);
      expect({ ...fast.config, rootfs: undefined }).toEqual({ ...kaniko.config, rootfs: undefined });
      expect(fast.config.config).toMatchObject({
        Cmd: ['node', '/sless/server.js'],
        WorkingDir: '/sless/code',
        User: 'node',
      });
      expect(fast.manifest.mediaType).toBe(kaniko.manifest.mediaType);
      expect(fast.manifest.layers.slice(0, -1)).toEqual(kaniko.manifest.layers.slice(0, -1));
      const shape = (entries: TarEntry[]) =>
        entries
          // kaniko writes an entry for / too, which no runtime applies (the base's / stands).
          .filter((e) => e.path !== '/' && e.path !== '')
          .map((e) => [e.path.replace(/\/$/, ''), e.type, e.mode.toString(8), e.uid, e.gid].join(' '))
          .sort();
      const kanikoCode = await tarEntries(kaniko.layers.at(-1) as Buffer);
      const fastCode = await tarEntries(fast.layers.at(-1) as Buffer);
      expect(shape(fastCode)).toEqual(shape(kanikoCode));
      expect(fastCode.find((e) => e.path.endsWith('handler.js'))?.content).toContain('hello from node v2');
      expect(kanikoCode.find((e) => e.path.endsWith('handler.js'))?.content).toContain('hello from node v1');
      const newSets = (await replicaSets('hello')).map((r) => r.metadata.name);
      expect(newSets).toHaveLength(2);
      expect(newSets).toContain(helloSets[0]);
      expect((await replicaSets('snake')).map((r) => r.metadata.name).sort()).toEqual(snakeSets);
      expect((await pods('snake')).map((p) => p.metadata.uid).sort()).toEqual(snakePods);
      const [, snakeBody] = await callFunction(env, 'snake');
      expect(snakeBody).toContain('hello from python v1');
    },
    BUILD_MS * 2,
  );

  it(
    'a failing build keeps the old pod serving, and status carries the kaniko log tail',
    async () => {
      const before = (await pods('snake')).map((p) => p.metadata.uid).sort();
      // Pods reach nothing beyond the node, so pip asks PyPI through a mirror on the host, as in an
      // air-gapped cluster; PyPI itself answers that the project does not exist. (Asked directly, pip
      // would wait out its connect timeouts and retries, over a minute, and fail for the network.)
      const pypi = await startPypiMirror(env.node.gatewayIp);
      let failed: FunctionStatus;
      try {
        const broken = await env.commit({
          'snake/requirements.txt': [
            `--index-url ${pypi.url}simple/`,
            `--trusted-host ${env.node.gatewayIp}`,
            'sless-no-such-package-e2e==0.0.1',
            '',
          ].join('\n'),
          'snake/handler.py': pythonHandler(`"hello from python v2"`),
        });
        failed = await eventually(
          'snake build failed',
          async () => {
            const s = await status('snake');
            return s?.lastBuild?.commit === broken && s.lastBuild.result === 'Failed' ? s : undefined;
          },
          BUILD_MS,
        );
      } finally {
        await pypi.close();
      }
      // pip's own words, from the build pod's log: the index has no such project.
      expect(failed.lastBuild?.logTail).toMatch(
        /No matching distribution found for sless-no-such-package-e2e==0\.0\.1/,
      );
      // Not Ready and Stalled: the commit did not land and waiting will not land it; v1 serves on.
      const ready = failed.conditions?.find((c) => c.type === 'Ready');
      expect([ready?.status, ready?.reason]).toEqual(['False', 'BuildFailed']);
      expect(ready?.message).toMatch(/; still serving [0-9a-f]{12}-[0-9a-f]{8}$/);
      expect(failed.conditions?.find((c) => c.type === 'Stalled')?.status).toBe('True');
      const [code, body] = await callFunction(env, 'snake');
      expect(code).toBe(200);
      expect(body).toContain('hello from python v1');
      expect((await pods('snake')).map((p) => p.metadata.uid).sort()).toEqual(before);
    },
    BUILD_MS * 2,
  );

  it(
    'a Python commit back to the dependencies of its first image is built as a code layer on it, with no Job, and serves',
    async () => {
      const jobsBefore = (await buildJobs('snake')).map((j) => j.metadata.name).sort();
      // Drops the broken requirements.txt: the dependencies are those of the first, kaniko-built image.
      const fixed = await env.commit({
        'snake/requirements.txt': null,
        'snake/handler.py': pythonHandler(`"hello from python v3"`),
      });
      expect(await servedBody('snake', 'hello from python v3')).toContain('hello from python v3');
      expect((await buildJobs('snake')).map((j) => j.metadata.name).sort()).toEqual(jobsBefore);
      const built = (await status('snake'))?.lastBuild;
      expect(built).toMatchObject({ result: 'Succeeded', commit: fixed });
      expect(built?.message).toMatch(new RegExp(`^code layer on .*:${first}@sha256:[0-9a-f]{64}, no Job$`));
      const image = await pullTestImage(env.node.registry.url, `${env.ns}-snake`, fixed);
      expect(image.config.config).toMatchObject({
        Cmd: ['python', '/sless/server.py'],
        WorkingDir: '/sless/code',
        User: '10001',
      });
    },
    BUILD_MS,
  );

  it(
    "a FunctionJob's Job pod runs the handler once on the node and the result lands in status",
    async () => {
      await env.commit({
        'jobs/once.yaml':
          'apiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: once\nspec: {function: hello, runId: 1, event: {n: 7}}\n',
      });
      const done = await eventually(
        'FunctionJob once finished',
        async () => {
          const job = await env.system.store.get('FunctionJob', env.ns, 'once');
          const phase = job?.status?.phase;
          return phase === 'Succeeded' || phase === 'Failed' ? job : undefined;
        },
        BUILD_MS,
      );
      expect(done.status).toMatchObject({
        phase: 'Succeeded',
        observedRunId: 1,
        result: { statusCode: 200, body: 'hello from node v2' },
      });
      const runPods = (
        await listObjects<KubeObject>(env.http, POD, {
          namespace: env.ns,
          labels: { 'sless.dev/functionjob': 'once' },
        })
      ).items;
      expect(runPods).toHaveLength(1);
      expect((runPods[0]?.status as { phase?: string } | undefined)?.phase).toBe('Succeeded');
    },
    BUILD_MS * 2,
  );

  it(
    "pinning the first commit serves its body again from its image without a kaniko Job; unpinning serves the head's",
    async () => {
      const jobsBefore = (await buildJobs('hello')).map((j) => j.metadata.name).sort();
      const pin = (method: 'POST' | 'DELETE', commit?: string) =>
        fetch(`${env.system.url}/v1/namespaces/${env.ns}/sources/repo/pin`, {
          method,
          ...(commit
            ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ commit }) }
            : {}),
        });
      expect((await pin('POST', first)).status).toBe(200);
      await servedBody('hello', 'hello from node v1');
      // /fn/ moves to the pinned revision's pods once the old ones are gone, and status says so once
      // the controller has seen the rollout finish: a moment later, not necessarily before.
      await eventually(
        'status names the pinned commit serving',
        async () => (await status('hello'))?.servingCommit === first,
        60_000,
      );
      expect((await pin('DELETE')).status).toBe(200);
      await servedBody('hello', 'hello from node v2');
      expect((await buildJobs('hello')).map((j) => j.metadata.name).sort()).toEqual(jobsBefore);
    },
    BUILD_MS,
  );
});
