/**
 * deploy/ is valid for `kubectl apply -k`: every object it renders passes a server-side dry-run apply
 * on the real API server, images are pinned, and the controller starts the way it ships
 * (`node bin/sless.js controller`, config from env) and refuses a bad S3 endpoint at startup.
 */
import { spawn } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import { loadAsyncInvocations } from '../../src/config/kube.js';
import { RUNTIME_INFO } from '../../src/core/runtimes.js';
import type { RuntimeName } from '../../src/core/schemas.js';
import { RUNTIME_CONTEXT_FILES } from '../../src/packaging/build-context.js';
import { apply, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOY_DIR, loadKustomization, typeOf } from './deploy-manifests.js';
import { eventually, type KubeEnv, kubeEnv } from './harness.js';

let env: KubeEnv;
let objects: KubeObject[];
beforeAll(async () => {
  env = await kubeEnv('deploy');
  objects = await loadKustomization(DEPLOY_DIR);
});
afterAll(async () => {
  await env?.close();
});

function images(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(images);
  if (value && typeof value === 'object')
    return Object.entries(value).flatMap(([k, v]) =>
      k === 'image' && typeof v === 'string' ? [v] : images(v),
    );
  return [];
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('deploy/', () => {
  it('renders the namespace, RBAC, config, secrets, controller and all four CRDs', () => {
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual(
      expect.arrayContaining([
        'Namespace/sless-system',
        'ServiceAccount/sless-controller',
        'ClusterRole/sless-controller',
        'ClusterRoleBinding/sless-controller',
        'ConfigMap/sless-controller',
        'Secret/sless-s3',
        'Secret/sless-registry-push',
        'Secret/sless-registry-pull',
        'Deployment/sless-controller',
        'Service/sless-api',
        'CustomResourceDefinition/functions.sless.dev',
        'CustomResourceDefinition/gitsources.sless.dev',
        'CustomResourceDefinition/triggers.sless.dev',
        'CustomResourceDefinition/functionjobs.sless.dev',
      ]),
    );
    for (const o of objects.filter(
      (x) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition'].includes(x.kind),
    ))
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('sless-system');
  });

  it('RabbitMQ is opt-in: the component gives the controller SLESS_ASYNC_AMQP_URL from Secret sless-rabbitmq, and it all applies', async () => {
    type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };
    const controllerEnv = (rendered: KubeObject[]) => {
      const deployment = rendered.find(
        (o) => o.kind === 'Deployment' && o.metadata.name === 'sless-controller',
      );
      const spec = deployment?.spec as { template: { spec: { containers: { env?: Env[] }[] } } };
      return spec.template.spec.containers[0]?.env ?? [];
    };
    // By default nothing points at a broker: /fn/ stays synchronous and no Secret is required.
    expect(controllerEnv(objects).map((e) => e.name)).not.toContain('SLESS_ASYNC_AMQP_URL');
    expect(objects.map((o) => o.metadata.name)).not.toContain('sless-rabbitmq');
    // An overlay as an operator writes it: deploy/ plus the component.
    const overlay = await mkdtemp(join(tmpdir(), 'sless-overlay-'));
    try {
      await writeFile(
        join(overlay, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${DEPLOY_DIR}\n` +
          `components:\n  - ${join(DEPLOY_DIR, 'components', 'rabbitmq')}\n`,
      );
      const rendered = await loadKustomization(overlay);
      const containerEnv = controllerEnv(rendered);
      const url = containerEnv.find((e) => e.name === 'SLESS_ASYNC_AMQP_URL');
      expect(url?.value).toBeUndefined();
      expect(url?.valueFrom?.secretKeyRef).toEqual({ name: 'sless-rabbitmq', key: 'url' });
      // The names are the ones the controller reads, and the template's URL is one it accepts.
      const secret = rendered.find((o) => o.kind === 'Secret' && o.metadata.name === 'sless-rabbitmq') as
        | (KubeObject & { stringData: Record<string, string> })
        | undefined;
      expect(secret?.metadata.namespace).toBe('sless-system');
      const stream = containerEnv.find((e) => e.name === 'SLESS_ASYNC_STREAM')?.value;
      expect(
        loadAsyncInvocations({ SLESS_ASYNC_AMQP_URL: secret?.stringData.url, SLESS_ASYNC_STREAM: stream }),
      ).toEqual({ amqpUrl: secret?.stringData.url, stream: 'sless.invocations' });
      // The original env is kept, and the patched Deployment and the Secret pass a dry-run apply.
      expect(containerEnv.map((e) => e.name)).toEqual(
        expect.arrayContaining(['SLESS_CONTROLLER_NAMESPACE', 'POD_NAME']),
      );
      const ns = rendered.find((o) => o.kind === 'Namespace');
      if (ns) await apply(env.http, typeOf(ns), ns);
      for (const object of rendered.filter(
        (o) => o.kind === 'Deployment' || o.metadata.name === 'sless-rabbitmq',
      ))
        await apply<KubeObject>(env.http, typeOf(object), object, { dryRun: true });
    } finally {
      await rm(overlay, { recursive: true, force: true });
    }
  });

  it('pre-pulling is opt-in: the component sets SLESS_PREPULL=true, which the controller reads, and it all applies', async () => {
    const controllerEnv = (rendered: KubeObject[]) => {
      const deployment = rendered.find(
        (o) => o.kind === 'Deployment' && o.metadata.name === 'sless-controller',
      );
      const spec = deployment?.spec as {
        template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } };
      };
      return spec.template.spec.containers[0]?.env ?? [];
    };
    expect(controllerEnv(objects).map((e) => e.name)).not.toContain('SLESS_PREPULL');
    const overlay = await mkdtemp(join(tmpdir(), 'sless-overlay-'));
    try {
      await writeFile(
        join(overlay, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${DEPLOY_DIR}\n` +
          `components:\n  - ${join(DEPLOY_DIR, 'components', 'prepull')}\n`,
      );
      const rendered = await loadKustomization(overlay);
      const value = controllerEnv(rendered).find((e) => e.name === 'SLESS_PREPULL')?.value;
      expect(value).toBe('true');
      const roles = rendered.filter(
        (o) => o.kind === 'Role' && o.metadata.name === 'sless-controller-prepull',
      );
      expect(roles.map((o) => o.metadata.namespace)).toEqual(['sless-system']);
      const ns = rendered.find((o) => o.kind === 'Namespace');
      if (ns) await apply(env.http, typeOf(ns), ns);
      for (const object of rendered.filter(
        (o) => o.kind === 'Deployment' || o.metadata.name.includes('prepull'),
      ))
        await apply<KubeObject>(env.http, typeOf(object), object, { dryRun: true });
    } finally {
      await rm(overlay, { recursive: true, force: true });
    }
  });

  it('pins every image (a version or a digest, never :latest)', () => {
    const all = images(objects);
    expect(all.length).toBeGreaterThan(0);
    for (const image of all) {
      expect(image).not.toMatch(/:latest(@|$)/);
      expect(image).toMatch(/:[0-9][\w.-]*$|@sha256:[0-9a-f]{64}$/);
    }
  });

  it('every object passes a server-side dry-run apply (what kubectl apply -k would send)', async () => {
    // The namespace must exist for namespaced dry-runs; creating it is harmless.
    const ns = objects.find((o) => o.kind === 'Namespace');
    if (ns) await apply(env.http, typeOf(ns), ns);
    const results: string[] = [];
    for (const object of objects) {
      const applied = await apply<KubeObject>(env.http, typeOf(object), object, { dryRun: true });
      expect(applied.metadata.name).toBe(object.metadata.name);
      results.push(`${object.kind}/${object.metadata.name}`);
    }
    expect(results).toHaveLength(objects.length);
  });

  it('the controller image ships every file the controller reads at run time (a missing one fails only in the cluster)', async () => {
    const dockerfile = await readFile(join(DEPLOY_DIR, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^FROM node:\d+\.\d+\.\d+-[a-z]+-slim$/m);
    expect(dockerfile).not.toMatch(/:latest/);
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) =>
      (m[1] ?? '').split(/\s+/),
    );
    // bin/ runs the compiled dist/ (from the build stage), runtimes/ goes into every build context, crds/ is read by tools.
    expect(copied).toEqual(
      expect.arrayContaining(['package.json', 'package-lock.json', 'bin', 'runtimes', 'crds']),
    );
    expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(dockerfile).toMatch(/ENTRYPOINT \["node", (?:"--[a-z-]+(?:=\d+)?", )*"bin\/sless.js"\]/);
    // What the kaniko contexts need from runtimes/ is really there.
    for (const [runtime, files] of Object.entries(RUNTIME_CONTEXT_FILES))
      for (const file of files)
        await access(join(PACKAGE_ROOT, 'runtimes', RUNTIME_INFO[runtime as RuntimeName].serverDir, file));
  });

  it('the controller starts the way it ships (bin/sless.js controller, env config) and serves /readyz', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'sless.js'), 'controller'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        KUBECONFIG: env.cluster.kubeconfigPath,
        SLESS_HOST: '127.0.0.1',
        SLESS_PORT: String(port),
        SLESS_CONTROLLER_NAMESPACE: env.controllerNs,
        SLESS_WATCH_NAMESPACES: env.ns,
        SLESS_REGISTRY: env.config.registry,
        SLESS_S3_ENDPOINT: env.config.s3.endpoint,
        SLESS_S3_BUCKET: env.bucket,
        AWS_ACCESS_KEY_ID: env.config.s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: env.config.s3.secretAccessKey,
        SLESS_STATE_DIR: join('/tmp', `sless-ship-${port}`),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    try {
      await eventually(
        `controller /readyz (output: ${output.slice(-500)})`,
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        30_000,
      );
      expect(output).toContain('sless controller running');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('refuses an S3 endpoint without a scheme at startup, naming the setting', async () => {
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'sless.js'), 'controller'], {
      env: {
        PATH: process.env.PATH ?? '',
        SLESS_HOST: '127.0.0.1',
        SLESS_CONTROLLER_NAMESPACE: 'sless-system',
        SLESS_REGISTRY: 'registry.example.com/sless',
        SLESS_S3_ENDPOINT: 's3.example.com:9000',
        SLESS_S3_BUCKET: 'builds',
        AWS_ACCESS_KEY_ID: 'a',
        AWS_SECRET_ACCESS_KEY: 'b',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code).toBe(2);
    expect(stderr).toContain('SLESS_S3_ENDPOINT');
    expect(stderr).toContain('full URL');
  });
});
