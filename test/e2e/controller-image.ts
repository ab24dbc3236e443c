/**
 * The sless controller image as it ships: built from deploy/Dockerfile by a kaniko Job on the real
 * node (its `npm ci` and its sops stage's `go install` fetch through pull-through mirrors on the host,
 * test/e2e/package-mirror.ts) and pushed to the node's registry.
 *
 * A build takes minutes, so the image is kept as an OCI layout under the test cache, keyed by a hash
 * of everything that decides its content: the Dockerfile, every file its COPY lines take from the
 * repository (path, executable bit, bytes), the base image's digest and the kaniko image. Any change
 * to any of those is a new key and a new kaniko build; `npm ci` installs exactly the lockfile, which
 * the key covers. Only the newest layout is kept.
 *
 * A new key (every change to src/) builds again, but not from scratch: kaniko keeps the layers of the
 * Dockerfile's RUN lines in a cache registry whose storage lives in the test cache
 * (`--cache=true --cache-repo`), so the `npm ci` layers are reused while package.json,
 * package-lock.json, the Dockerfile, the base image and kaniko are unchanged (kaniko's own cache keys
 * chain those), and only `npm run build` and the COPY lines run again.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeHttp } from '../../src/platform/kube/http.js';
import { apply, getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { JOB, POD } from '../../src/platform/kube/resource-types.js';
import { ensureBinaries, freePort, httpOk, note, startRegistry, waitFor } from '../cluster/fixture.ts';
import { contextKey } from '../cluster/image-context.ts';
import { GATEWAY_IP, type TestNode } from '../cluster/node.ts';
import { eventually } from '../kube/harness.js';
import { registryDigest } from './harness.ts';
import { startGoMirror, startNpmMirror, testCacheRoot } from './package-mirror.ts';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCKERFILE = 'deploy/Dockerfile';
const REPOSITORY = 'sless-test/sless-controller';
const BUILD_MS = 25 * 60_000;
/**
 * The npm mirror's port on the node's bridge address. Fixed, because its URL is a build argument and
 * kaniko's cache key of every RUN line includes the build arguments: a new port each run would miss
 * the cached `npm ci` layers. The bridge address exists only while the node lock is held.
 */
const NPM_MIRROR_PORT = 47873;
/** The Go module mirror's, fixed for the same reason. */
const GO_MIRROR_PORT = 47874;
/** Above this the layer cache is dropped and starts again (each new src/ adds a `npm run build` layer). */
const LAYER_CACHE_MAX_BYTES = 2 * 1024 ** 3;

function skopeo(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('skopeo', ['copy', '--quiet', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`skopeo copy ${args.join(' ')} failed:\n${err}`)),
    );
  });
}

interface PodStatus {
  phase?: string;
  containerStatuses?: { state?: { terminated?: { exitCode: number; message?: string; reason?: string } } }[];
}

/** Runs the kaniko Job and returns the digest kaniko pushed (its termination message). */
async function kanikoBuild(
  node: TestNode,
  http: KubeHttp,
  context: string,
  destination: string,
  podLog: (namespace: string, pod: string) => Promise<string>,
  mirrors: { npm: string; go: string },
  cacheRegistry: string,
): Promise<string> {
  const name = 'build-sless-controller';
  const namespace = 'default';
  await apply(http, JOB, {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: BUILD_MS / 1000,
      template: {
        metadata: { labels: { 'sless-test/build': name } },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          // The node's resolver: npm's registry is resolved as on the host, cluster DNS or not.
          dnsPolicy: 'Default',
          containers: [
            {
              name: 'kaniko',
              image: node.images.kaniko,
              args: [
                '--context=dir:///workspace',
                `--dockerfile=/workspace/${DOCKERFILE}`,
                `--destination=${destination}`,
                '--digest-file=/dev/termination-log',
                '--snapshot-mode=redo',
                // FROM node:… is Docker Hub's name; the node's registry holds that image.
                `--registry-map=index.docker.io=${node.registryHost}`,
                `--insecure-registry=${node.registryHost}`,
                `--build-arg=NPM_CONFIG_REGISTRY=${mirrors.npm}`,
                `--build-arg=GOPROXY=${mirrors.go}`,
                // RUN layers from and to the layer cache; its entries are content-keyed, so no expiry.
                '--cache=true',
                `--cache-repo=${cacheRegistry}/sless-controller-cache`,
                '--cache-ttl=8760h',
                `--insecure-registry=${cacheRegistry}`,
                '--log-timestamp=true',
              ],
              terminationMessagePath: '/dev/termination-log',
              terminationMessagePolicy: 'File',
              volumeMounts: [{ name: 'context', mountPath: '/workspace', readOnly: true }],
            },
          ],
          volumes: [{ name: 'context', hostPath: { path: context, type: 'Directory' } }],
        },
      },
    },
  } as KubeObject);
  const pod = await eventually(
    'the controller image build finished',
    async () => {
      const pods = await listObjects<KubeObject>(http, POD, {
        namespace,
        labels: { 'sless-test/build': name },
      });
      const p = pods.items[0];
      const phase = (p?.status as PodStatus | undefined)?.phase;
      if (phase === 'Succeeded' || phase === 'Failed') return p;
      const job = await getObject<KubeObject>(http, JOB, namespace, name);
      const failed = (job?.status as { failed?: number } | undefined)?.failed;
      if (failed) throw new Error(`Job ${name} failed: ${JSON.stringify(job?.status)}`);
      return undefined;
    },
    BUILD_MS,
  );
  const status = pod.status as PodStatus;
  const terminated = status.containerStatuses?.[0]?.state?.terminated;
  if (status.phase !== 'Succeeded' || !terminated?.message?.startsWith('sha256:'))
    throw new Error(
      `kaniko could not build ${DOCKERFILE} (${terminated?.reason ?? status.phase}); its log ends:\n` +
        (await podLog(namespace, pod.metadata.name)).split('\n').slice(-40).join('\n'),
    );
  // Where the build's time went: stages, base unpacks, cache hits and misses, the push.
  const log = await podLog(namespace, pod.metadata.name).catch(() => '');
  const steps = log
    .split('\n')
    .filter((l) =>
      /Retrieving image|Unpacking rootfs|cach|Taking snapshot of full|Pushing image|Pushed /i.test(l),
    )
    .map((l) => `  ${l.replace(/level=info msg=/, '')}`);
  note(`kaniko log of the controller image build (excerpt):\n${steps.join('\n')}`);
  return terminated.message.trim();
}

/** Bytes under dir (du), 0 when it does not exist. */
function diskUsage(dir: string): number {
  const res = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
  return res.status === 0 ? Number(res.stdout.split('\t')[0]) : 0;
}

/**
 * A registry for kaniko's layer cache, on the node's bridge address, storing under the test cache in a
 * directory named by what the cached `npm ci` layers depend on (older ones are removed).
 */
async function startLayerCache(node: TestNode, key: string): Promise<{ host: string; stop: () => void }> {
  const storage = join(testCacheRoot(), `controller-layer-cache-${key}`);
  mkdirSync(testCacheRoot(), { recursive: true });
  for (const old of readdirSync(testCacheRoot()))
    if (old.startsWith('controller-layer-cache-') && join(testCacheRoot(), old) !== storage)
      rmSync(join(testCacheRoot(), old), { recursive: true, force: true });
  if (diskUsage(storage) > LAYER_CACHE_MAX_BYTES) rmSync(storage, { recursive: true, force: true });
  mkdirSync(storage, { recursive: true });
  const root = join(node.root, 'layer-cache-registry');
  mkdirSync(root, { recursive: true });
  const host = `${GATEWAY_IP}:${await freePort()}`;
  const { DOCKER_REGISTRY } = await ensureBinaries();
  const reg = startRegistry(root, 'registry', DOCKER_REGISTRY, storage, host);
  await waitFor(reg, 'layer cache registry /v2/', 30_000, () => httpOk(`http://${host}/v2/`));
  return {
    host,
    stop: () => {
      try {
        process.kill(reg.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    },
  };
}

/**
 * Puts the controller image into the node's registry and returns its reference by digest: from the
 * cache when its key matches, else built by kaniko on the node (and then cached).
 */
export async function controllerImage(
  node: TestNode,
  http: KubeHttp,
  podLog: (namespace: string, pod: string) => Promise<string>,
): Promise<{ image: string; builtByKaniko: boolean; key: string }> {
  // Pushed every time (seconds): the key needs the base's digest, which only the registry gives.
  const bases = await node.pushControllerBases();
  const [baseRepository, baseTag] = bases.node.slice(node.registryHost.length + 1).split(':');
  const baseDigest = await registryDigest(node, baseRepository ?? '', baseTag ?? '');
  const kaniko = node.images.kaniko.slice(node.registryHost.length + 1);
  const { key, paths } = contextKey(REPO_ROOT, DOCKERFILE, [baseDigest, kaniko]);
  const tag = key.slice(0, 20);
  const destination = `${node.registryHost}/${REPOSITORY}:${tag}`;
  const cached = join(testCacheRoot(), `controller-image-${tag}`);
  const t0 = Date.now();
  let builtByKaniko = false;
  if (existsSync(join(cached, '.complete'))) {
    await skopeo(['--dest-tls-verify=false', `oci:${cached}:controller`, `docker://${destination}`]);
    note(`controller image ${tag} from the cache ${cached} in ${Date.now() - t0} ms`);
  } else {
    // The build context: exactly what the Dockerfile copies, plus the Dockerfile.
    const context = join(node.root, 'controller-context');
    for (const path of [...paths, DOCKERFILE]) {
      mkdirSync(dirname(join(context, path)), { recursive: true });
      cpSync(join(REPO_ROOT, path), join(context, path), { recursive: true });
    }
    // npm through the host: from a pod, npm's registry fails TLS here (the machine's egress re-signs it
    // with a CA only the host trusts: SELF_SIGNED_CERT_IN_CHAIN).
    const mirror = await startNpmMirror(GATEWAY_IP, join(testCacheRoot(), 'npm-tarballs'), NPM_MIRROR_PORT);
    const goMirror = await startGoMirror(GATEWAY_IP, join(testCacheRoot(), 'go-modules'), GO_MIRROR_PORT);
    const layerKey = createHash('sha256')
      .update(
        [DOCKERFILE, 'package.json', 'package-lock.json']
          .map((f) => readFileSync(join(REPO_ROOT, f), 'utf8'))
          .join('\0'),
      )
      .update(`\0${baseDigest}\0${kaniko}`)
      .digest('hex')
      .slice(0, 20);
    const layerCache = await startLayerCache(node, layerKey);
    const digest = await kanikoBuild(
      node,
      http,
      context,
      destination,
      podLog,
      { npm: mirror.url, go: goMirror.url.replace(/\/$/, '') },
      layerCache.host,
    ).finally(async () => {
      layerCache.stop();
      await goMirror.close();
      return mirror.close();
    });
    builtByKaniko = true;
    note(`controller image ${tag} built by kaniko on the node in ${Date.now() - t0} ms (${digest})`);
    const partial = `${cached}.tmp-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    await skopeo([
      '--src-tls-verify=false',
      // skopeo takes a tag or a digest, not both.
      `docker://${node.registryHost}/${REPOSITORY}@${digest}`,
      `oci:${partial}:controller`,
    ]);
    writeFileSync(join(partial, '.complete'), `${digest}\n`);
    // One image is enough: the layouts of older keys (about 100 MB each) go.
    for (const old of readdirSync(testCacheRoot()))
      if (old.startsWith('controller-image-') && join(testCacheRoot(), old) !== partial)
        rmSync(join(testCacheRoot(), old), { recursive: true, force: true });
    renameSync(partial, cached);
  }
  const digest = await registryDigest(node, REPOSITORY, tag);
  return { image: `${node.registryHost}/${REPOSITORY}@${digest}`, builtByKaniko, key };
}
