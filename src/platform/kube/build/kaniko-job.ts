/**
 * The kaniko Job of one build, as pure data. It runs in the controller's namespace, where the registry
 * push credentials live; tenants never see push credentials. The tenant's dependency install runs in
 * an init container that holds no credential at all (see install-step.ts).
 */
import type { SlessFunction } from '../../../core/resources.js';
import { RUNTIME_INFO } from '../../../core/runtimes.js';
import {
  finalDockerfile,
  INSTALL_IMAGES,
  INSTALL_UID,
  installScript,
  sanitizeScript,
  WORKSPACE,
} from '../../../packaging/install-step.js';
import {
  ANNOTATION_COMMIT_FULL,
  ANNOTATION_IMAGE,
  IMAGE_LABEL_DEPENDENCY_KEY,
  LABEL_BUILD_KEY,
  LABEL_COMPONENT,
  LABEL_DEPENDENCY_KEY,
  LABEL_FUNCTION,
  LABEL_FUNCTION_NAMESPACE,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../labels.js';
import type { KubeObject } from '../objects.js';

/**
 * A maintained kaniko fork (osscontainertools, published as martizih/kaniko), pinned by digest: the
 * v1.28.3-alpine digest as referenced publicly (e.g. in Dockerfiles pinning `FROM martizih/kaniko:
 * v1.28.3-alpine@sha256:38e3…`). Verify with `crane digest martizih/kaniko:v1.28.3-alpine` when bumping.
 */
export const KANIKO_IMAGE =
  'martizih/kaniko:v1.28.3-alpine@sha256:38e3516bcd3ba2646ffdfc06c724c55b3f8b5e6228ebca59b7550b8080c46c17';

/** Why a build went to kaniko instead of the code-layer path (see code-layer-build.ts). */
export const ANNOTATION_CODE_LAYER_SKIPPED = 'sless.dev/code-layer-skipped';

/** Pods of a build carry this label (besides Kubernetes' own job-name) so they are found by it. */
export const LABEL_BUILD = 'sless.dev/build';
export const KANIKO_CONTAINER = 'kaniko';
export const INSTALL_CONTAINER = 'install';
export const SANITIZE_CONTAINER = 'sanitize';
/**
 * Where kaniko reads its Dockerfile: a scratch volume that sless's own sanitize step writes and the
 * tenant's install step never mounts. (A downward-API volume of a pod annotation did the same job, but
 * its file was missing in kaniko's container now and then on the real node, failing the build.)
 */
export const DOCKERFILE_DIR = '/sless/dockerfile';
/** The sanitize step's variable holding the Dockerfile it writes. */
export const DOCKERFILE_ENV = 'SLESS_DOCKERFILE';

export interface KanikoSettings {
  controllerNamespace: string;
  registry: string;
  bucket: string;
  /** Full URL (scheme included): kaniko fails on a bare host. */
  s3Endpoint: string;
  s3Region: string;
  /** Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, in the controller's namespace. */
  s3CredentialsSecret: string;
  /** kubernetes.io/dockerconfigjson Secret used to push, in the controller's namespace. */
  pushSecret: string;
  kanikoImage?: string;
  /** Push over plain HTTP (a registry without TLS, e.g. in a test cluster); mirrors too. */
  insecureRegistry?: boolean;
  /**
   * Where kaniko pulls base images from instead (`index.docker.io=mirror.example.com/dockerhub`):
   * air-gapped clusters, pull-through caches, and the test node whose registry holds the bases.
   */
  registryMap?: readonly string[];
  /**
   * Package manager settings (GOPROXY, PIP_INDEX_URL, NPM_CONFIG_REGISTRY...) for the install step
   * alone: where build pods that reach no public registry fetch dependencies. Never credentials.
   */
  packageMirrors?: readonly { name: string; value: string }[];
  deadlineSeconds?: number;
  serviceAccountName?: string;
}

export function contextKey(fn: SlessFunction, commit: string): string {
  return contextKeyOf(fn.metadata.namespace, fn.metadata.name, commit);
}

/** Where a function's build context at a commit lives in the bucket. */
export function contextKeyOf(namespace: string, name: string, commit: string): string {
  return `contexts/${namespace}/${name}/${commit}.tar.gz`;
}

/** `{registry}/{ns}-{fn}:{full commit sha}`: the tag is the commit that was built, never :latest. */
export function imageTag(registry: string, fn: SlessFunction, commit: string): string {
  return `${registry}/${fn.metadata.namespace}-${fn.metadata.name}:${commit}`;
}

/**
 * kaniko's flags, chosen for a Dockerfile that only copies prepared files onto a pinned base image
 * (what each flag costs was read in kaniko v1.24.0's executor and go-containerregistry v0.20):
 *
 * - No `--reproducible`. It runs `mutate.Canonical` over the final image, which re-reads, re-tars and
 *   re-gzips every layer, the base's too, whether or not it is canonical already: 37 s of a 48 s
 *   warm kaniko run for a Node function on the test node (its base: 135 MB gzipped, 359 MB as tar).
 *   The osscontainertools fork's FF_KANIKO_REPRODUCIBLE_PRESERVE_BASE_LAYERS puts the base layers
 *   back only after that same rewrite, so it saves pushing, not the work. Without the flag the
 *   base layers are pushed unchanged (skipped where the registry has them already) and are the very
 *   blobs the build pod's install image and every other function on the runtime share on a node. What it bought, and what sless keeps instead: the same code tree gives the same image
 *   because a function's build is found by its build key (`lookup` reads the succeeded Job labelled
 *   with it, which lives as long as the Function) and never run twice. What is lost: building the same
 *   tree again where that Job is gone (the Function deleted and re-created, another cluster, a Job
 *   deleted by hand) gives another digest, since kaniko stamps the config's `created` and writes each
 *   copied file's PAX atime/ctime, and so a digest cannot be recomputed from the source to check it.
 * - No `--cache`/`--cache-repo`. kaniko caches RUN layers and, with `--cache-copy-layers`, COPY
 *   layers; this Dockerfile has no RUN, and its one COPY that changes (the code) is new in every
 *   build. `--cache` would only hash every context file twice for a cache key nothing looks up, and
 *   `--cache-copy-layers` would add a registry round trip per COPY to save copying server.js.
 * - No `--single-snapshot`: it walks the whole unpacked base twice, where every instruction here
 *   either changes metadata only or names the files it wrote, so no full walk happens at all.
 * - `--compressed-caching` stays at its default (on): each new layer is gzipped once and kept.
 * - `--skip-unused-stages` is moot: the Dockerfile has one stage.
 * - The base rootfs is still unpacked (11 s of that run): kaniko's COPY requires it, whatever the
 *   stage layout (a COPY --from in the final stage requires it as well), and v1.24.0 has no flag to
 *   skip it.
 */
export function kanikoArgs(
  settings: KanikoSettings,
  fn: SlessFunction,
  commit: string,
  dependencyKey?: string,
): string[] {
  const args = [
    // The install step's output; kaniko's Dockerfile is not in it, so the tenant cannot choose it.
    `--context=dir://${WORKSPACE}`,
    `--dockerfile=${DOCKERFILE_DIR}/Dockerfile`,
    `--destination=${imageTag(settings.registry, fn, commit)}`,
    // kaniko writes the pushed digest here; the kubelet turns it into the container's terminated message.
    '--digest-file=/dev/termination-log',
    // Only a full-filesystem snapshot reads the mode, which this Dockerfile never takes; should one
    // happen, redo compares mtime, size and mode rather than hashing every file of the base.
    '--snapshot-mode=redo',
  ];
  if (RUNTIME_INFO[fn.spec.runtime].family === 'go')
    args.push(`--build-arg=SLESS_ENTRYPOINT=${fn.spec.entrypoint}`);
  // The image says which dependencies it holds: the code-layer path reuses it only for the same key.
  if (dependencyKey) args.push(`--label=${IMAGE_LABEL_DEPENDENCY_KEY}=${dependencyKey}`);
  for (const entry of settings.registryMap ?? []) args.push(`--registry-map=${entry}`);
  if (settings.insecureRegistry)
    for (const host of insecureHosts(settings)) args.push(`--insecure-registry=${host}`);
  return args;
}

/** kaniko matches insecure registries by host[:port]: the push registry's and every mirror's. */
function insecureHosts(settings: KanikoSettings): string[] {
  const hostOf = (ref: string) => ref.split('/')[0] ?? ref;
  const mirrors = (settings.registryMap ?? []).map((entry) => hostOf(entry.slice(entry.indexOf('=') + 1)));
  return [...new Set([hostOf(settings.registry), ...mirrors])].sort();
}

/**
 * The pod's own images go through the same registry map as kaniko's base images: a cluster that
 * needs a mirror for FROM lines (air-gapped, or the test node) cannot pull them from their origin
 * either. The kubelet takes one reference, so the first mirror of the image's registry wins.
 */
export function mirroredImage(image: string, registryMap: readonly string[] = []): string {
  const slash = image.indexOf('/');
  const first = slash === -1 ? '' : image.slice(0, slash);
  const explicitHost = first.includes('.') || first.includes(':') || first === 'localhost';
  const registry = normalizeRegistry(explicitHost ? first : 'index.docker.io');
  let path = explicitHost ? image.slice(slash + 1) : image;
  if (registry === 'index.docker.io' && !path.includes('/')) path = `library/${path}`;
  for (const entry of registryMap) {
    const equals = entry.indexOf('=');
    if (normalizeRegistry(entry.slice(0, equals)) === registry) return `${entry.slice(equals + 1)}/${path}`;
  }
  return image;
}

function normalizeRegistry(host: string): string {
  return host === 'docker.io' || host === 'registry-1.docker.io' ? 'index.docker.io' : host;
}

/** A container's security context for sless's own steps and the tenant's install: no root, no privilege. */
export const UNPRIVILEGED = Object.freeze({
  runAsUser: INSTALL_UID,
  runAsGroup: INSTALL_UID,
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: Object.freeze({ drop: Object.freeze(['ALL']) }),
  seccompProfile: Object.freeze({ type: 'RuntimeDefault' }),
});

export function kanikoJob(
  settings: KanikoSettings,
  options: {
    name: string;
    fn: SlessFunction;
    commit: string;
    buildKey: string;
    /** A presigned GET URL for this build's context object, and nothing else. */
    contextUrl: string;
    /** The tree's dependency key, when it has one (an interpreted runtime): labels Job and image. */
    dependencyKey?: string;
    /** Why the code-layer path did not build this, for status. */
    codeLayerSkipped?: string;
  },
): KubeObject {
  const { fn, commit, buildKey, name, contextUrl, dependencyKey, codeLayerSkipped } = options;
  const runtime = fn.spec.runtime;
  const labels = {
    [LABEL_COMPONENT]: 'build',
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_FUNCTION]: fn.metadata.name,
    [LABEL_FUNCTION_NAMESPACE]: fn.metadata.namespace,
    [LABEL_BUILD_KEY]: buildKey,
    ...(dependencyKey ? { [LABEL_DEPENDENCY_KEY]: dependencyKey } : {}),
  };
  const resources = { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } };
  const unprivileged = UNPRIVILEGED;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: settings.controllerNamespace,
      labels,
      annotations: {
        [ANNOTATION_COMMIT_FULL]: commit,
        [ANNOTATION_IMAGE]: imageTag(settings.registry, fn, commit),
        ...(codeLayerSkipped ? { [ANNOTATION_CODE_LAYER_SKIPPED]: codeLayerSkipped.slice(0, 1000) } : {}),
      },
    },
    spec: {
      // A failed build stays failed: it is retried only for a new build key or on request.
      backoffLimit: 0,
      activeDeadlineSeconds: settings.deadlineSeconds ?? 1800,
      template: {
        metadata: { labels: { ...labels, [LABEL_BUILD]: name } },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          ...(settings.serviceAccountName ? { serviceAccountName: settings.serviceAccountName } : {}),
          securityContext: { fsGroup: INSTALL_UID },
          initContainers: [
            {
              // Tenant code runs here, and only here: no secret, no token, no credential of any kind.
              name: INSTALL_CONTAINER,
              image: mirroredImage(INSTALL_IMAGES[runtime], settings.registryMap),
              command: ['sh', '-c', installScript(runtime)],
              env: [
                { name: 'SLESS_CONTEXT_URL', value: contextUrl },
                { name: 'HOME', value: '/tmp' },
                ...(RUNTIME_INFO[runtime].family === 'go'
                  ? [
                      { name: 'SLESS_ENTRYPOINT', value: fn.spec.entrypoint },
                      { name: 'GOCACHE', value: '/tmp/go-build' },
                      { name: 'GOPATH', value: '/tmp/go' },
                      // "auto" lets code whose go.mod needs a newer Go fetch it from the module proxy.
                      { name: 'GOTOOLCHAIN', value: 'auto' },
                      { name: 'CGO_ENABLED', value: '0' },
                    ]
                  : []),
                ...(settings.packageMirrors ?? []).map(({ name, value }) => ({ name, value })),
              ],
              securityContext: unprivileged,
              resources,
              volumeMounts: [
                { name: 'workspace', mountPath: WORKSPACE },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
            {
              // sless's own step, after the tenant's has exited: no link may lead kaniko out of the build.
              name: SANITIZE_CONTAINER,
              image: mirroredImage(INSTALL_IMAGES[runtime], settings.registryMap),
              command: [
                'sh',
                '-c',
                `${sanitizeScript()}\nprintf '%s' "$${DOCKERFILE_ENV}" > ${DOCKERFILE_DIR}/Dockerfile`,
              ],
              env: [{ name: DOCKERFILE_ENV, value: finalDockerfile(runtime) }],
              securityContext: unprivileged,
              resources,
              volumeMounts: [
                { name: 'workspace', mountPath: WORKSPACE },
                { name: 'dockerfile', mountPath: DOCKERFILE_DIR },
              ],
            },
          ],
          containers: [
            {
              // Holds the push secret and runs no tenant code: its Dockerfile only copies files.
              name: KANIKO_CONTAINER,
              image: settings.kanikoImage ?? KANIKO_IMAGE,
              args: kanikoArgs(settings, fn, commit, dependencyKey),
              terminationMessagePath: '/dev/termination-log',
              terminationMessagePolicy: 'File',
              resources,
              volumeMounts: [
                { name: 'workspace', mountPath: WORKSPACE, readOnly: true },
                { name: 'dockerfile', mountPath: DOCKERFILE_DIR, readOnly: true },
                { name: 'docker-config', mountPath: '/kaniko/.docker', readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: 'workspace', emptyDir: {} },
            { name: 'tmp', emptyDir: {} },
            { name: 'dockerfile', emptyDir: {} },
            {
              name: 'docker-config',
              secret: {
                secretName: settings.pushSecret,
                items: [{ key: '.dockerconfigjson', path: 'config.json' }],
              },
            },
          ],
        },
      },
    },
  };
}
