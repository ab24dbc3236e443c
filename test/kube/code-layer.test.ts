/**
 * The code-layer fast path against the real API server and Debian's docker-registry: a code-only
 * commit of a function whose kaniko-built image is in the registry becomes that image with its code
 * layer replaced, pushed through the registry API and recorded without a Job; pulled back, it has the
 * same config (entrypoint, env, workdir, user, labels) and the same other layers, and its code layer
 * holds exactly the commit's files. A missing or unsuitable base, a dependency change and a compiled
 * runtime go to kaniko, and the Job says why.
 *
 * No kaniko runs here: the first image of each function is pushed by the test in the layout the
 * kaniko Dockerfile gives (one layer per COPY, the code last), and its Job is played.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildRequest } from '../../src/core/interfaces.js';
import { buildName } from '../../src/core/naming.js';
import type { RuntimeName } from '../../src/core/schemas.js';
import { dependencyKeyOf } from '../../src/packaging/dependency-inputs.js';
import { KubeBuildArchive } from '../../src/platform/kube/build/build-archive.js';
import { CodeLayerBuilder } from '../../src/platform/kube/build/code-layer-build.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { CONFIG_MAP, JOB } from '../../src/platform/kube/resource-types.js';
import { LocalRepositoryReader } from '../../src/source/readers.js';
import { freePort, startProcess } from '../cluster/fixture.ts';
import { functionManifest, nodeHandler, TestRepo } from '../helpers/git.js';
import { pullTestImage, pushTestImage, tarEntries } from '../helpers/oci-registry.js';
import {
  eventually,
  fakeDigest,
  type KubeEnv,
  kanikoBuilder,
  kubeEnv,
  logger,
  markBuildSucceeded,
} from './harness.js';

let env: KubeEnv;
let registryUrl: string;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  env = await kubeEnv('codelayer');
  registryUrl = env.cluster.registry.url;
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  await env?.close();
});

const codeLayer = () =>
  new CodeLayerBuilder({
    http: env.http,
    controllerNamespace: env.controllerNs,
    registry: env.config.registry,
    insecure: true,
    credentials: async () => undefined,
    logger,
  });
const builder = () => kanikoBuilder(env, env.http, { codeLayer: codeLayer() });

const jobsOf = async (fn: string) =>
  (
    await listObjects<KubeObject>(env.http, JOB, {
      namespace: env.controllerNs,
      labels: { 'sless.dev/function': fn, 'sless.dev/function-namespace': env.ns },
    })
  ).items;

async function repoWith(files: Record<string, string>): Promise<TestRepo> {
  const repo = await TestRepo.create(files);
  cleanups.push(() => repo.remove());
  return repo;
}

/** A build of `name` (code in dir `name`) at the repository's head, as the reconciler asks for one. */
async function requestAt(
  repo: TestRepo,
  name: string,
  runtime: RuntimeName = 'nodejs20',
): Promise<BuildRequest> {
  const reader = new LocalRepositoryReader({ path: repo.dir, branch: 'main' });
  const commit = await reader.resolveHead();
  const snapshot = await reader.snapshot(commit);
  return {
    fn: {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name, namespace: env.ns },
      spec: {
        runtime,
        entrypoint: 'handler.handle',
        memoryMb: 128,
        timeoutSec: 30,
        replicas: 1,
        source: { path: '.' },
      },
    },
    // Distinct per commit, as the planner's key of each tree is.
    buildKey: commit.slice(0, 32),
    commit,
    codeDir: name,
    excludedFiles: new Set([`${name}/function.yaml`]),
    snapshot,
  };
}

/** An uncompressed tar of `files` made by GNU tar, root-owned, as a layer of a base image. */
async function gnuTar(files: Record<string, string>): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), 'sless-layer-'));
  try {
    for (const [path, content] of Object.entries(files)) {
      if (path.endsWith('/')) await mkdir(join(dir, path), { recursive: true });
      else {
        await mkdir(dirname(join(dir, path)), { recursive: true });
        await writeFile(join(dir, path), content);
      }
    }
    const paths = Object.keys(files).sort();
    return execFileSync('tar', [
      '-c',
      '-C',
      dir,
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '--no-recursion',
      ...paths,
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The image kaniko builds from the Node Dockerfile, in miniature: the base's layer, then one layer per
 * WORKDIR and COPY, the code last; metadata steps are empty layers.
 */
async function nodeImage(
  code: Record<string, string>,
  dependencyKey: string,
  lastStep = 'COPY code/ /sless/code/',
) {
  const layers = [
    await gnuTar({ 'etc/': '', 'etc/os-release': 'ID=debian\n', 'usr/': '', 'usr/local/': '' }),
    await gnuTar({ 'sless/': '', 'sless/code/': '' }),
    await gnuTar({ 'sless/': '', 'sless/server.js': '// server\n' }),
    await gnuTar({
      'sless/': '',
      'sless/code/': '',
      'sless/code/node_modules/': '',
      'sless/code/node_modules/dep.js': '1\n',
    }),
    await gnuTar(
      Object.fromEntries([
        ['sless/', ''],
        ['sless/code/', ''],
        ...Object.entries(code).map(([p, c]) => [`sless/code/${p}`, c]),
      ]),
    ),
  ];
  const config = {
    architecture: 'amd64',
    os: 'linux',
    created: '2026-01-01T00:00:00Z',
    config: {
      Env: [
        'PATH=/usr/local/bin:/usr/bin:/bin',
        'NODE_ENV=production',
        'SLESS_CODE_DIR=/sless/code',
        'PORT=8080',
      ],
      Cmd: ['node', '/sless/server.js'],
      WorkingDir: '/sless/code',
      User: 'node',
      ExposedPorts: { '8080/tcp': {} },
      Labels: { 'dev.sless.dependency-key': dependencyKey },
    },
    history: [
      { created_by: 'debootstrap' },
      { created_by: 'ENV NODE_ENV=production SLESS_CODE_DIR=/sless/code PORT=8080', empty_layer: true },
      { created_by: 'WORKDIR /sless/code' },
      { created_by: 'COPY server.js /sless/server.js' },
      { created_by: 'COPY deps/ /sless/code/' },
      { created_by: lastStep },
      { created_by: 'USER node', empty_layer: true },
      { created_by: 'EXPOSE 8080', empty_layer: true },
      { created_by: 'CMD ["node", "/sless/server.js"]', empty_layer: true },
    ],
  };
  return { layers, config };
}

/** Plays kaniko for the first build of a function: the image pushed, its Job succeeded with its digest. */
async function firstBuild(
  request: BuildRequest,
  image?: { layers: Buffer[]; config: Record<string, unknown> },
) {
  const b = builder();
  const building = b.build(request);
  const job = buildName(request.fn.metadata.name, request.commit);
  await eventually(`build Job ${job}`, () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job));
  const digest = image
    ? await pushTestImage(
        registryUrl,
        `${env.ns}-${request.fn.metadata.name}`,
        request.commit,
        image.layers,
        image.config,
      )
    : fakeDigest(job);
  await markBuildSucceeded(env.http, env.controllerNs, job, digest);
  return { record: await building, job: await getObject<KubeObject>(env.http, JOB, env.controllerNs, job) };
}

/** A build that must go to kaniko: resolves to its Job once created (then played, so build() ends). */
async function kanikoBuild(request: BuildRequest): Promise<KubeObject> {
  const building = builder().build(request);
  const name = buildName(request.fn.metadata.name, request.commit);
  const job = await eventually(`build Job ${name}`, () =>
    getObject<KubeObject>(env.http, JOB, env.controllerNs, name),
  );
  await markBuildSucceeded(env.http, env.controllerNs, name, fakeDigest(name));
  await building;
  return job;
}

const skipped = (job: KubeObject | undefined) => job?.metadata.annotations?.['sless.dev/code-layer-skipped'];

describe('code-layer fast path (real API server, real docker-registry)', () => {
  it('a code-only commit is the previous image with its code layer replaced, pushed with no Job', async () => {
    const repo = await repoWith({
      'hello/function.yaml': functionManifest('hello'),
      'hello/handler.js': nodeHandler(`return 'v1';`),
    });
    const first = await requestAt(repo, 'hello');
    const key = await dependencyKeyOf(first);
    if (!('key' in key)) throw new Error(key.refused);
    const { record: built, job } = await firstBuild(
      first,
      await nodeImage({ 'handler.js': nodeHandler(`return 'v1';`) }, key.key),
    );
    // The first build has no earlier image: kaniko, and the Job and the image carry the key.
    expect(skipped(job)).toMatch(/no earlier image of this function has these dependencies/);
    expect(job?.metadata.labels?.['sless.dev/dependency-key']).toBe(key.key);
    expect(built.message).toMatch(/^built with kaniko: /);

    // A code-only change: a new handler, a helper script kept executable, a link inside the tree.
    await repo.write({
      'hello/handler.js': nodeHandler(`return require('./lib/answer.js');`),
      'hello/lib/answer.js': 'module.exports = "v2";\n',
      'hello/lib/run.sh': '#!/bin/sh\necho hi\n',
    });
    await chmod(join(repo.dir, 'hello/lib/run.sh'), 0o755);
    await symlink('lib/answer.js', join(repo.dir, 'hello/answer.js'));
    await repo.commit({});
    const second = await requestAt(repo, 'hello');
    const record = await builder().build(second);

    expect(record).toMatchObject({ result: 'Succeeded', commit: second.commit, buildKey: second.buildKey });
    expect(record.message).toBe(`code layer on ${built.image}, no Job`);
    expect(record.image).toMatch(
      new RegExp(`^${env.config.registry}/${env.ns}-hello:${second.commit}@sha256:[0-9a-f]{64}$`),
    );
    expect((await jobsOf('hello')).map((j) => j.metadata.name)).toEqual([job?.metadata.name]);

    // Pulled back by its tag: the digest the record names, the base's config and other layers.
    const repository = `${env.ns}-hello`;
    const base = await pullTestImage(registryUrl, repository, first.commit);
    const image = await pullTestImage(registryUrl, repository, second.commit);
    expect(`sha256:${record.image?.split('@sha256:')[1]}`).toBe(image.digest);
    expect(image.manifest.mediaType).toBe(base.manifest.mediaType);
    expect(image.manifest.layers.slice(0, -1)).toEqual(base.manifest.layers.slice(0, -1));
    expect(image.manifest.layers.at(-1)?.mediaType).toBe(base.manifest.layers.at(-1)?.mediaType);
    expect({ ...image.config, rootfs: undefined }).toEqual({ ...base.config, rootfs: undefined });
    expect(image.config.rootfs.diff_ids.slice(0, -1)).toEqual(base.config.rootfs.diff_ids.slice(0, -1));

    // The code layer: exactly the commit's files under /sless/code, modes from git, no manifest, owned
    // as kaniko's COPY of the install step's workspace leaves them (seen on the real node): the install
    // uid, setgid directories; /sless itself is the WORKDIR's, root's.
    const entries = await tarEntries(image.layers.at(-1) as Buffer);
    expect(
      entries.map((e) => [e.path, e.type, e.mode.toString(8), e.uid, e.gid, e.linkpath ?? e.content]),
    ).toEqual([
      ['sless/', 'Directory', '755', 0, 0, undefined],
      ['sless/code/', 'Directory', '2755', 10001, 10001, undefined],
      // A link's own mode means nothing on Linux; the build context's tar writes the same.
      ['sless/code/answer.js', 'SymbolicLink', '755', 10001, 10001, 'lib/answer.js'],
      [
        'sless/code/handler.js',
        'File',
        '644',
        10001,
        10001,
        nodeHandler(`return require('./lib/answer.js');`),
      ],
      ['sless/code/lib/', 'Directory', '2755', 10001, 10001, undefined],
      ['sless/code/lib/answer.js', 'File', '644', 10001, 10001, 'module.exports = "v2";\n'],
      ['sless/code/lib/run.sh', 'File', '755', 10001, 10001, '#!/bin/sh\necho hi\n'],
    ]);
    // The paths kaniko's layer of the same COPY has (the base's), as the fixture laid it out.
    const baseEntries = await tarEntries(base.layers.at(-1) as Buffer);
    expect(baseEntries.map((e) => [e.path, e.uid, e.gid])).toEqual([
      ['sless/', 0, 0],
      ['sless/code/', 0, 0],
      ['sless/code/handler.js', 0, 0],
    ]);

    // Durable: another controller (a restart) finds it by build key, and builds nothing again.
    const again = builder();
    expect(await again.lookup(second.fn, second.buildKey)).toEqual(record);
    expect(await again.build(second)).toEqual(record);
    expect(await jobsOf('hello')).toHaveLength(1);

    // A third code-only commit starts from the newest image, the one the fast path made.
    await repo.commit({ 'hello/lib/answer.js': 'module.exports = "v3";\n' });
    const third = await requestAt(repo, 'hello');
    const next = await builder().build(third);
    expect(next.message).toBe(`code layer on ${record.image}, no Job`);
    const v3 = await pullTestImage(registryUrl, repository, third.commit);
    expect(
      (await tarEntries(v3.layers.at(-1) as Buffer)).find((e) => e.path === 'sless/code/lib/answer.js')
        ?.content,
    ).toBe('module.exports = "v3";\n');
    expect(v3.manifest.layers).toHaveLength(base.manifest.layers.length);

    // History and garbage collection see the records as builds, and remove them whole.
    const archive = new KubeBuildArchive({
      http: env.http,
      s3: env.s3,
      bucket: env.bucket,
      controllerNamespace: env.controllerNs,
      logger,
    });
    const listed = await archive.list({ namespace: env.ns, name: 'hello' });
    const made = listed.find((b) => b.commit === second.commit);
    expect(made).toMatchObject({
      buildKey: second.buildKey,
      image: record.image,
      running: false,
      serving: false,
    });
    expect(listed.map((b) => b.commit).sort()).toEqual([first.commit, second.commit, third.commit].sort());
    await archive.remove(
      made as NonNullable<typeof made>,
      listed.filter((b) => b !== made),
    );
    expect(await getObject(env.http, CONFIG_MAP, env.controllerNs, made?.id ?? '')).toBeUndefined();
    expect(await builder().lookup(second.fn, second.buildKey)).toBeUndefined();
    expect((await archive.list({ namespace: env.ns, name: 'hello' })).map((b) => b.commit).sort()).toEqual(
      [first.commit, third.commit].sort(),
    );
  });

  it('a base image missing from the registry goes to kaniko, and the Job says why', async () => {
    const repo = await repoWith({
      'gone/function.yaml': functionManifest('gone'),
      'gone/handler.js': nodeHandler(`return 1;`),
    });
    const { record } = await firstBuild(await requestAt(repo, 'gone'));
    await repo.commit({ 'gone/handler.js': nodeHandler(`return 2;`) });
    const job = await kanikoBuild(await requestAt(repo, 'gone'));
    expect(skipped(job)).toBe(`base image ${record.image} is not in the registry`);
    expect(await jobsOf('gone')).toHaveLength(2);
  });

  it('a base image whose last layer is not its code, or that holds other dependencies, goes to kaniko', async () => {
    const repo = await repoWith({
      'odd/function.yaml': functionManifest('odd'),
      'odd/handler.js': nodeHandler(`return 1;`),
    });
    const first = await requestAt(repo, 'odd');
    const key = await dependencyKeyOf(first);
    if (!('key' in key)) throw new Error(key.refused);
    const { record } = await firstBuild(
      first,
      await nodeImage({ 'handler.js': '1' }, key.key, 'COPY server.js /sless/server.js'),
    );
    await repo.commit({ 'odd/handler.js': nodeHandler(`return 2;`) });
    const job = await kanikoBuild(await requestAt(repo, 'odd'));
    expect(skipped(job)).toBe(
      `base image ${record.image}'s last layer is not its code (it comes from "COPY server.js /sless/server.js")`,
    );

    const other = await repoWith({
      'lbl/function.yaml': functionManifest('lbl'),
      'lbl/handler.js': nodeHandler(`return 1;`),
    });
    const labelled = await requestAt(other, 'lbl');
    const { record: base } = await firstBuild(
      labelled,
      await nodeImage({ 'handler.js': '1' }, 'f'.repeat(32)),
    );
    await other.commit({ 'lbl/handler.js': nodeHandler(`return 2;`) });
    const job2 = await kanikoBuild(await requestAt(other, 'lbl'));
    expect(skipped(job2)).toMatch(
      new RegExp(`^base image ${base.image} holds dependencies for key f{32}, not [0-9a-f]{32}$`),
    );
  });

  it('a dependency change and a compiled runtime go to kaniko', async () => {
    const lock = '{"name":"deps","lockfileVersion":3,"packages":{"":{"name":"deps"}}}\n';
    const repo = await repoWith({
      'deps/function.yaml': functionManifest('deps'),
      'deps/handler.js': nodeHandler(`return 1;`),
      'deps/package.json': '{"name":"deps"}\n',
      'deps/package-lock.json': lock,
    });
    const first = await requestAt(repo, 'deps');
    const key = await dependencyKeyOf(first);
    if (!('key' in key)) throw new Error(key.refused);
    await firstBuild(first, await nodeImage({ 'handler.js': '1' }, key.key));
    await repo.commit({
      'deps/package.json': '{"name":"deps","description":"changed"}\n',
      'deps/handler.js': nodeHandler(`return 2;`),
    });
    const job = await kanikoBuild(await requestAt(repo, 'deps'));
    expect(skipped(job)).toBe('no earlier image of this function has these dependencies');
    expect(job.metadata.labels?.['sless.dev/dependency-key']).toMatch(/^[0-9a-f]{32}$/);
    expect(job.metadata.labels?.['sless.dev/dependency-key']).not.toBe(key.key);

    const go = await repoWith({
      'gofn/function.yaml': functionManifest('gofn', { runtime: 'go1.21' }),
      'gofn/handler.go': 'package handler\n',
    });
    await firstBuild(await requestAt(go, 'gofn', 'go1.21'));
    await go.commit({ 'gofn/handler.go': 'package handler\n// v2\n' });
    const goJob = await kanikoBuild(await requestAt(go, 'gofn', 'go1.21'));
    expect(skipped(goJob)).toBe('go1.21 is compiled: its code is built into the binary');
    expect(goJob.metadata.labels?.['sless.dev/dependency-key']).toBeUndefined();
  });
});

/**
 * Debian's docker-registry with htpasswd auth of its own on a free loopback port: anonymous requests
 * get 401 and a Basic challenge, as a registry that gives no anonymous push does.
 */
async function startAuthRegistry(user: string, password: string) {
  const root = await mkdtemp(join(tmpdir(), 'sless-auth-registry-'));
  const port = await freePort();
  const hash = execFileSync('python3', [
    '-c',
    'import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))',
    password,
  ])
    .toString()
    .trim();
  await writeFile(join(root, 'htpasswd'), `${user}:${hash}\n`);
  const config = join(root, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log: {level: warn, accesslog: {disabled: true}}',
      `storage: {filesystem: {rootdirectory: ${join(root, 'data')}}}`,
      `http: {addr: "127.0.0.1:${port}", secret: ${randomBytes(8).toString('hex')}}`,
      `auth: {htpasswd: {realm: sless-test, path: ${join(root, 'htpasswd')}}}`,
      '',
    ].join('\n'),
  );
  const proc = startProcess(root, 'registry', '/usr/bin/docker-registry', ['serve', config], root);
  const url = `http://127.0.0.1:${port}`;
  await eventually('auth registry answers', async () => {
    const res = await fetch(`${url}/v2/`).catch(() => undefined);
    await res?.arrayBuffer();
    return res?.status === 401 || undefined;
  });
  return {
    host: `127.0.0.1:${port}`,
    url,
    close: async () => {
      try {
        process.kill(-proc.pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      await proc.exited;
      await rm(root, { recursive: true, force: true });
    },
  };
}

describe('code-layer fast path with push credentials (docker-registry with htpasswd auth)', () => {
  it('pushes with the push credentials; without valid ones the build goes to kaniko with the refusal', async () => {
    const password = `push-${randomBytes(8).toString('hex')}`;
    const registry = await startAuthRegistry('pusher', password);
    cleanups.push(() => registry.close());
    const basic = { authorization: `Basic ${Buffer.from(`pusher:${password}`).toString('base64')}` };
    const withCredentials = (credentials: { username: string; password: string } | undefined) =>
      kanikoBuilder(env, env.http, {
        registry: registry.host,
        codeLayer: new CodeLayerBuilder({
          http: env.http,
          controllerNamespace: env.controllerNs,
          registry: registry.host,
          insecure: true,
          credentials: async () => credentials,
          logger,
        }),
      });

    const repo = await repoWith({
      'authed/function.yaml': functionManifest('authed'),
      'authed/handler.js': nodeHandler(`return 1;`),
    });
    const first = await requestAt(repo, 'authed');
    const key = await dependencyKeyOf(first);
    if (!('key' in key)) throw new Error(key.refused);
    // The first build, played: kaniko pushed this image with the same credentials.
    const building = withCredentials({ username: 'pusher', password }).build(first);
    const job = buildName('authed', first.commit);
    await eventually(`build Job ${job}`, () => getObject<KubeObject>(env.http, JOB, env.controllerNs, job));
    const image = await nodeImage({ 'handler.js': nodeHandler(`return 1;`) }, key.key);
    const repository = `${env.ns}-authed`;
    const digest = await pushTestImage(
      registry.url,
      repository,
      first.commit,
      image.layers,
      image.config,
      basic,
    );
    await markBuildSucceeded(env.http, env.controllerNs, job, digest);
    await building;

    // Wrong credentials: refused by the registry, so kaniko builds it, and the Job says so.
    await repo.commit({ 'authed/handler.js': nodeHandler(`return 2;`) });
    const second = await requestAt(repo, 'authed');
    const refused = withCredentials({ username: 'pusher', password: 'wrong' }).build(second);
    const job2 = buildName('authed', second.commit);
    const kanikoJob = await eventually(`build Job ${job2}`, () =>
      getObject<KubeObject>(env.http, JOB, env.controllerNs, job2),
    );
    expect(skipped(kanikoJob)).toMatch(
      new RegExp(
        `^${registry.host}/${repository}:${first.commit}@sha256:[0-9a-f]{64}: registry ${registry.host} answered 401 to GET manifest`,
      ),
    );
    // The refusal names no credential.
    expect(skipped(kanikoJob)).not.toContain('wrong');
    await markBuildSucceeded(env.http, env.controllerNs, job2, fakeDigest(job2));
    await refused;

    // The push credentials: the new image is there, readable with them, and no third Job.
    await repo.commit({ 'authed/handler.js': nodeHandler(`return 3;`) });
    const third = await requestAt(repo, 'authed');
    const record = await withCredentials({ username: 'pusher', password }).build(third);
    expect(record.message).toMatch(/^code layer on .*, no Job$/);
    const pulled = await pullTestImage(registry.url, repository, third.commit, basic);
    expect(`sha256:${record.image?.split('@sha256:')[1]}`).toBe(pulled.digest);
    expect(
      (await tarEntries(pulled.layers.at(-1) as Buffer)).find((e) => e.path === 'sless/code/handler.js')
        ?.content,
    ).toBe(nodeHandler(`return 3;`));
    expect(await jobsOf('authed')).toHaveLength(2);
  });
});
