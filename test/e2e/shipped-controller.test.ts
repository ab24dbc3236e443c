/**
 * The controller as it ships, on a real node: its image built by kaniko from deploy/Dockerfile,
 * installed with `kubectl apply -k` of a test overlay of deploy/ (test/e2e/overlay), running in the
 * cluster under its own ServiceAccount and RBAC, reaching the API server through the `kubernetes`
 * Service. It builds one function with kaniko and serves it at /fn/, called through the controller
 * Service's ClusterIP from the host; the function reads a secret that the repository holds only as a
 * SOPS file, which the image's own sops decrypts with the operator's age key. Needs root (see
 * test/cluster/node.ts).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeHttp } from '../../src/platform/kube/http.js';
import { getObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import {
  DEPLOYMENT,
  JOB,
  POD,
  type ResourceType,
  SECRET,
  SERVICE,
} from '../../src/platform/kube/resource-types.js';
import { GATEWAY_IP, startTestNode, type TestNode } from '../cluster/node.ts';
import { functionManifest, git, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { ageKey, secretYaml, sopsEncrypt } from '../helpers/sops.js';
import { dockerConfigJson, eventually, specOf } from '../kube/harness.js';
import { controllerImage, REPO_ROOT } from './controller-image.ts';

const FUNCTION: ResourceType = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  plural: 'functions',
  namespaced: true,
};

const SYSTEM = 'sless-system';
const CONTROLLER = 'sless-controller';
const SERVE_MS = 10 * 60_000;
const BODY = 'hello from the shipped controller';
/** Found nowhere but in the SOPS file (encrypted) and in the function's answer. */
const GREETING = `greeting-${randomBytes(8).toString('hex')}`;

describe('e2e on a real node: the controller as it ships', () => {
  let node: TestNode;
  let http: KubeHttp;
  let ns = '';
  let commit = '';
  let image = '';
  const cleanups: (() => Promise<unknown> | undefined)[] = [];

  /** The built kubectl against the test cluster; rejects with its stderr. */
  const kubectl = (args: string[], input?: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const child = spawn(node.kubectl, ['--kubeconfig', node.kubeconfigPath, ...args], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => {
        out += c;
      });
      child.stderr.setEncoding('utf8').on('data', (c: string) => {
        err += c;
      });
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolve(out) : reject(new Error(`kubectl ${args.join(' ')} (exit ${code}):\n${err}`)),
      );
      child.stdin.end(input ?? '');
    });
  const podLog = (namespace: string, pod: string) =>
    kubectl(['logs', '-n', namespace, pod, '--all-containers']);

  /** The controller's Service address as seen from the host (kube-proxy routes ClusterIPs there). */
  const controllerUrl = async () => {
    const service = await getObject<KubeObject>(http, SERVICE, SYSTEM, 'sless-api');
    const ip = (service?.spec as { clusterIP?: string } | undefined)?.clusterIP;
    if (!ip) throw new Error('Service sless-api has no ClusterIP');
    return `http://${ip}`;
  };

  /**
   * A wait that times out says what the cluster looked like: the objects' status and the controller's
   * own log, which are gone once the node is stopped.
   */
  const withDiagnostics = async <T>(wait: () => Promise<T>, seen: () => string): Promise<T> => {
    try {
      return await wait();
    } catch (error) {
      const sections = await Promise.all(
        [
          kubectl(['get', 'gitsources,functions,jobs,deployments,pods', '-A', '-o', 'wide']),
          kubectl(['get', 'functions,gitsources', '-n', ns, '-o', 'yaml']),
          // Every replica's: the leader does the work, and either may be it.
          kubectl([
            'logs',
            '-n',
            SYSTEM,
            '-l',
            `app.kubernetes.io/name=${CONTROLLER}`,
            '--all-containers',
            '--prefix',
            '--tail=150',
          ]),
          kubectl(['get', 'events', '-A', '--sort-by=.lastTimestamp']),
        ].map((p) => p.catch((e: Error) => `(unavailable: ${e.message})`)),
      );
      throw new Error(
        `${(error as Error).message}\nlast answer: ${seen()}\n--- cluster at the timeout ---\n${sections.join('\n---\n')}`,
      );
    }
  };

  beforeAll(async () => {
    node = await startTestNode();
    cleanups.push(() => node.stop());
    http = new KubeHttp(node.kubeConfig);
    cleanups.push(async () => http.close());

    // What deploy/README.md leaves to the operator: the image, the registry, a bucket, credentials.
    const built = await controllerImage(node, http, podLog);
    image = built.image;
    const s3 = new S3Client({
      endpoint: node.s3.endpoint,
      region: node.s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: node.s3.accessKeyId, secretAccessKey: node.s3.secretAccessKey },
    });
    await s3.send(new CreateBucketCommand({ Bucket: 'sless-builds' }));
    s3.destroy();

    const layer = mkdtempSync(join(tmpdir(), 'sless-overlay-'));
    cleanups.push(async () => rmSync(layer, { recursive: true, force: true }));
    // The operator's age key: its private half goes into the controller namespace, as README says.
    const operatorKey = await ageKey(layer, 'operator.agekey');
    const privateKey = readFileSync(operatorKey.file, 'utf8')
      .split('\n')
      .find((line) => line.startsWith('AGE-SECRET-KEY-'));
    if (!privateKey) throw new Error('age-keygen wrote no private key');
    const [name, digest] = image.split('@');
    const registryAuth = (user: string) =>
      dockerConfigJson(node.registryHost, user, randomBytes(6).toString('hex'));
    const literal = (key: string, value: string) => `      - ${JSON.stringify(`${key}=${value}`)}`;
    // Block style throughout: a flow sequence cannot hold block entries.
    const secret = (name: string, type: string, literals: string[]) => [
      `  - name: ${name}`,
      `    namespace: ${SYSTEM}`,
      '    behavior: replace',
      `    type: ${type}`,
      '    literals:',
      ...literals,
    ];
    writeFileSync(
      join(layer, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        // kustomize takes a base directory only by a relative path.
        'resources:',
        `  - ${relative(layer, join(REPO_ROOT, 'test', 'e2e', 'overlay'))}`,
        'images:',
        '  - name: ghcr.io/sless-dev/sless-controller',
        `    newName: ${name}`,
        `    digest: ${digest}`,
        'generatorOptions:',
        '  disableNameSuffixHash: true',
        'configMapGenerator:',
        `  - name: sless-controller`,
        `    namespace: ${SYSTEM}`,
        '    behavior: merge',
        '    literals:',
        ...[
          ['SLESS_REGISTRY', node.registryHost],
          ['SLESS_S3_ENDPOINT', node.s3.endpoint],
          ['SLESS_S3_REGION', node.s3.region],
          ['SLESS_KANIKO_IMAGE', node.images.kaniko],
          // The runtimes' FROM lines name Docker Hub images; the node's registry holds them.
          ['SLESS_KANIKO_REGISTRY_MAP', `index.docker.io=${node.registryHost}`],
        ].map(([k, v]) => literal(k ?? '', v ?? '')),
        'secretGenerator:',
        ...secret('sless-s3', 'Opaque', [
          literal('AWS_ACCESS_KEY_ID', node.s3.accessKeyId),
          literal('AWS_SECRET_ACCESS_KEY', node.s3.secretAccessKey),
        ]),
        ...['sless-registry-push', 'sless-registry-pull'].flatMap((secretName) =>
          secret(secretName, 'kubernetes.io/dockerconfigjson', [
            literal('.dockerconfigjson', registryAuth(secretName)),
          ]),
        ),
        // Not part of deploy/: the operator creates it when repositories hold SOPS files.
        ...secret('sless-sops-age', 'Opaque', [literal('age.agekey', privateKey)]).map((line) =>
          line === '    behavior: replace' ? '    behavior: create' : line,
        ),
        '',
      ].join('\n'),
    );
    await kubectl(['apply', '-k', layer]);
    // However many replicas deploy/ asks for: every one updated and available.
    await kubectl(['rollout', 'status', '-n', SYSTEM, `deployment/${CONTROLLER}`, '--timeout=5m']);

    // A tenant's repository, on a git server the controller's pod reaches (the node's bridge address).
    const gitRoot = await tempDir('e2e-shipped-git');
    cleanups.push(async () => rmSync(gitRoot, { recursive: true, force: true }));
    await git(gitRoot, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    const gitServer = await startGitHttpServer(gitRoot, { host: GATEWAY_IP });
    cleanups.push(() => gitServer.close());
    const repo = await TestRepo.create({
      'hello/function.yaml': functionManifest('hello', {
        env: { GREETING: { secretRef: { name: 'payments', key: 'greeting' } } },
      }),
      'hello/handler.js': nodeHandler(`return '${BODY} ' + process.env.GREETING;`),
      'hello/payments.sops.yaml': await sopsEncrypt(
        layer,
        secretYaml('payments', { greeting: GREETING }),
        operatorKey.recipient,
      ),
    });
    cleanups.push(() => repo.remove());
    await git(repo.dir, 'remote', 'add', 'origin', join(gitRoot, 'fns.git'));
    await git(repo.dir, 'push', '--quiet', 'origin', 'main');
    commit = await git(repo.dir, 'rev-parse', 'HEAD');

    ns = `shipped-${randomBytes(3).toString('hex')}`;
    await kubectl(['create', 'namespace', ns]);
    // What deploy/sops-secrets.yaml asks of an operator whose tenants keep SOPS files: its
    // ClusterRole, bound in the tenant's namespace.
    await kubectl(['apply', '-f', join(REPO_ROOT, 'deploy', 'sops-secrets.yaml')]);
    await kubectl([
      'create',
      'rolebinding',
      'sless-sops-secrets',
      '-n',
      ns,
      '--clusterrole=sless-controller-sops-secrets',
      `--serviceaccount=${SYSTEM}:${CONTROLLER}`,
    ]);
    await kubectl(
      ['apply', '-f', '-'],
      [
        'apiVersion: sless.dev/v1alpha1',
        'kind: GitSource',
        `metadata: {name: repo, namespace: ${ns}}`,
        `spec: {url: "${gitServer.url}/fns.git", branch: main, path: ., interval: 1m}`,
        '',
      ].join('\n'),
    );
  }, 30 * 60_000);

  afterAll(async () => {
    for (const c of cleanups.reverse()) await c()?.catch(() => {});
  }, 300_000);

  it(
    'runs from the kaniko-built image under its ServiceAccount and serves a function it built with kaniko at /fn/, with a secret from a SOPS file',
    async () => {
      const deployment = await getObject<KubeObject>(http, DEPLOYMENT, SYSTEM, CONTROLLER);
      const spec = deployment?.spec as {
        replicas: number;
        template: { spec: { serviceAccountName?: string; containers: { image: string }[] } };
      };
      expect(spec.template.spec.containers[0]?.image).toBe(image);
      const pods = (
        await listObjects<KubeObject>(http, POD, {
          namespace: SYSTEM,
          labels: { 'app.kubernetes.io/name': CONTROLLER },
        })
      ).items.filter((p) => !p.metadata.deletionTimestamp);
      expect(pods).toHaveLength(spec.replicas);
      for (const pod of pods) {
        const podSpec = pod.spec as {
          serviceAccountName?: string;
          containers: { env?: { name: string }[] }[];
          volumes?: { projected?: { sources: { serviceAccountToken?: unknown }[] } }[];
        };
        // Its only credential is the ServiceAccount's token, mounted by the API server.
        expect(podSpec.serviceAccountName).toBe(CONTROLLER);
        expect(podSpec.volumes?.some((v) => v.projected?.sources.some((s) => s.serviceAccountToken))).toBe(
          true,
        );
        expect(podSpec.containers[0]?.env?.map((e) => e.name)).not.toContain('KUBECONFIG');
      }

      const base = await controllerUrl();
      let lastAnswer = 'no answer yet';
      const served = await withDiagnostics(
        () =>
          eventually(
            `/fn/${ns}/hello through the controller's Service serves the handler's body`,
            async () => {
              const res = await fetch(`${base}/fn/${ns}/hello`, { signal: AbortSignal.timeout(10_000) });
              const text = await res.text();
              lastAnswer = `${res.status} (server: ${res.headers.get('server') ?? '-'}) ${text.slice(0, 300)}`;
              if (res.status === 200 && text.includes(BODY) && text.includes(GREETING)) return { body: text };
              // A failed build will not heal by waiting: stop with the controller's own words.
              const fn = await getObject<KubeObject>(http, FUNCTION, ns, 'hello');
              const ready = (
                fn?.status as { conditions?: { type: string; reason?: string; message?: string }[] }
              )?.conditions?.find((c) => c.type === 'Ready');
              return ready?.reason === 'BuildFailed'
                ? { failed: ready.message ?? 'build failed' }
                : undefined;
            },
            SERVE_MS,
          ),
        () => lastAnswer,
      );
      if ('failed' in served) throw new Error(`hello's build failed: ${served.failed}`);
      expect(JSON.parse(served.body)).toBe(`${BODY} ${GREETING}`);
      // The image's sops decrypted the file into a Secret of the tenant's namespace, which the
      // function's pod reads by reference; the Deployment holds no value.
      const decrypted = await getObject<KubeObject & { data?: Record<string, string> }>(
        http,
        SECRET,
        ns,
        'payments',
      );
      expect(Buffer.from(decrypted?.data?.greeting ?? '', 'base64').toString()).toBe(GREETING);
      expect(JSON.stringify(await getObject<KubeObject>(http, DEPLOYMENT, ns, 'hello'))).not.toContain(
        GREETING,
      );

      // The in-cluster controller built it: one kaniko Job in its namespace, pushed at the commit.
      const jobs = (
        await listObjects<KubeObject>(http, JOB, {
          namespace: SYSTEM,
          labels: { 'sless.dev/function': 'hello', 'sless.dev/function-namespace': ns },
        })
      ).items;
      expect(jobs.map((j) => j.metadata.name)).toEqual([`build-hello-${commit.slice(0, 12)}`]);
      const fnImage = specOf<{ template: { spec: { containers: { image: string }[] } } }>(
        await getObject<KubeObject>(http, DEPLOYMENT, ns, 'hello'),
      ).template.spec.containers[0]?.image;
      expect(fnImage).toMatch(new RegExp(`^${node.registryHost}/${ns}-hello:${commit}@sha256:[0-9a-f]{64}$`));

      // kubectl, through the CRD's printer columns.
      const table = await kubectl(['get', 'functions', '-n', ns]);
      const row = table.split('\n').find((l) => l.startsWith('hello '));
      expect(row?.split(/\s+/).slice(0, 4)).toEqual(['hello', 'nodejs20', 'Ready', commit.slice(0, 12)]);
    },
    SERVE_MS * 2,
  );
});
