/**
 * Kube builds (row 7): tenant code never runs where a credential is. No real node runs here yet, so
 * this test works on the build Job as the real API server stores it, in two ways:
 *
 * 1. It reads the pod spec: the container that runs tenant code (the dependency install) gets no
 *    secret, no service-account token and no credential-bearing env; the container that holds the push
 *    secret (kaniko) builds a Dockerfile that runs nothing, written by sless's own step where the
 *    tenant's step cannot reach it.
 * 2. It replays the install container on this machine, as a kubelet would start it: the spec's image
 *    stands in as this machine's read-only /usr, the spec's command, env and emptyDir mounts exactly,
 *    its runAsUser, and the presigned URL against the real S3 server. The tenant's preinstall script
 *    then looks for credentials everywhere a container could find them, and finds none; it plants links
 *    to kaniko's files, which the next init container (sless's own) removes before kaniko runs.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import { chown, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SlessFunction } from '../../src/core/resources.js';
import { finalDockerfile, NON_EXECUTING_INSTRUCTIONS } from '../../src/packaging/install-step.js';
import {
  DOCKERFILE_DIR,
  DOCKERFILE_ENV,
  INSTALL_CONTAINER,
  KANIKO_CONTAINER,
  SANITIZE_CONTAINER,
} from '../../src/platform/kube/build/kaniko-job.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { JOB } from '../../src/platform/kube/resource-types.js';
import { LocalRepositoryReader } from '../../src/source/readers.js';
import { MINIMAL_BWRAP_ROOT } from '../helpers/bwrap-root.js';
import { TestRepo, tempDir } from '../helpers/git.js';
import { eventually, type KubeEnv, kanikoBuilder, kubeEnv } from '../kube/harness.js';

interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  envFrom?: unknown[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  securityContext?: {
    runAsUser?: number;
    runAsNonRoot?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type: string };
  };
  resources?: { limits?: Record<string, string>; requests?: Record<string, string> };
}
interface Volume {
  name: string;
  emptyDir?: object;
  secret?: { secretName: string };
  downwardAPI?: { items: { path: string; fieldRef: { fieldPath: string } }[] };
}
interface PodTemplate {
  metadata: { annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: {
    automountServiceAccountToken?: boolean;
    enableServiceLinks?: boolean;
    hostNetwork?: boolean;
    hostPID?: boolean;
    initContainers?: Container[];
    containers: Container[];
    volumes: Volume[];
  };
}

/** Looks for credentials wherever a container could find them, and prints what it found. */
const HUNT = `
const fs = require('fs');
const found = { ran: true, environs: {}, files: {}, env: process.env };
for (const pid of fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p))) {
  try { found.environs[pid] = fs.readFileSync('/proc/' + pid + '/environ', 'utf8'); } catch (e) { found.environs[pid] = 'error ' + e.code; }
}
for (const file of [
  '/var/run/secrets/kubernetes.io/serviceaccount/token',
  '/kaniko/.docker/config.json',
  '/root/.docker/config.json',
  '/root/.aws/credentials',
]) {
  try { found.files[file] = fs.readFileSync(file, 'utf8'); } catch (e) { found.files[file] = 'error ' + e.code; }
}
console.log('HUNT-REPORT ' + JSON.stringify(found));
// Then it tries to smuggle kaniko's own files into its image through links in the build.
fs.rmSync('/workspace/server.js', { force: true });
fs.symlinkSync('/kaniko/.docker/config.json', '/workspace/server.js');
fs.symlinkSync('../../kaniko/.docker', '/workspace/code/docker-dir');
fs.symlinkSync('handler.js', '/workspace/code/inside-link');
`;

describe('kube builds: tenant code never runs where credentials are (row 7)', () => {
  let env: KubeEnv;
  let repo: TestRepo;
  let template: PodTemplate;
  /** The build Job's activeDeadlineSeconds, which its presigned context URL must not outlive by much. */
  let deadlineSeconds = 0;
  let jobLabels: Record<string, string>;
  let work: string;

  beforeAll(async () => {
    env = await kubeEnv('sec-build');
    repo = await TestRepo.create({
      'hunter/function.yaml':
        'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: { name: hunter }\nspec: { runtime: nodejs20, entrypoint: handler.handle }\n',
      'hunter/handler.js': 'exports.handle = async () => 1;\n',
      'hunter/hunt.js': HUNT,
      'hunter/package.json': JSON.stringify({
        name: 'hunter',
        version: '1.0.0',
        scripts: { preinstall: 'node hunt.js' },
      }),
    });
    const reader = new LocalRepositoryReader({ path: repo.dir, branch: 'main' });
    const commit = await reader.resolveHead();
    const fn: SlessFunction = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name: 'hunter', namespace: env.ns },
      spec: {
        runtime: 'nodejs20',
        entrypoint: 'handler.handle',
        memoryMb: 128,
        timeoutSec: 30,
        replicas: 1,
        source: { path: '.' },
      },
    };
    const builder = kanikoBuilder(env);
    void builder
      .build({
        fn,
        buildKey: 'a'.repeat(32),
        commit,
        codeDir: 'hunter',
        excludedFiles: new Set(['hunter/function.yaml']),
        snapshot: await reader.snapshot(commit),
      })
      .catch(() => undefined);
    const job = await eventually('build Job', async () => {
      const jobs = await getObject<KubeObject>(
        env.http,
        JOB,
        env.controllerNs,
        `build-hunter-${commit.slice(0, 12)}`,
      );
      return jobs;
    });
    builder.stop();
    template = (job.spec as { template: PodTemplate }).template;
    deadlineSeconds = (job.spec as { activeDeadlineSeconds?: number }).activeDeadlineSeconds ?? 0;
    jobLabels = (job.metadata.labels ?? {}) as Record<string, string>;
    work = await tempDir('install-replay');
  }, 120_000);

  afterAll(async () => {
    await repo?.remove();
    if (work) await rm(work, { recursive: true, force: true });
    await env?.close();
  });

  const install = () => template.spec.initContainers?.find((c) => c.name === INSTALL_CONTAINER) as Container;
  const kaniko = () => template.spec.containers.find((c) => c.name === KANIKO_CONTAINER) as Container;
  const volume = (name: string) => template.spec.volumes.find((v) => v.name === name) as Volume;

  it('the install container gets no secret, no token and no credential-bearing env', () => {
    expect(template.spec.automountServiceAccountToken).toBe(false);
    const container = install();
    expect(container.image).toBe('node:20.20.2-bookworm-slim');
    expect(container.envFrom).toBeUndefined();
    expect((container.env ?? []).map((e) => e.name).sort()).toEqual(['HOME', 'SLESS_CONTEXT_URL']);
    expect((container.env ?? []).filter((e) => e.valueFrom !== undefined)).toEqual([]);
    // Its only mounts are empty scratch directories.
    for (const mount of container.volumeMounts ?? [])
      expect(Object.keys(volume(mount.name)).sort(), mount.name).toEqual(['emptyDir', 'name']);
    expect(container.securityContext).toMatchObject({
      runAsUser: 10001,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
    });
    // The context URL is presigned for this one object, read-only (GET), with no long-lived key in it.
    const url = new URL((container.env ?? []).find((e) => e.name === 'SLESS_CONTEXT_URL')?.value ?? '');
    expect(url.pathname).toMatch(/\/contexts\/[^/]+\/hunter\/[0-9a-f]{40}\.tar\.gz$/);
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.toString()).not.toContain(env.config.s3.secretAccessKey);
    // Good for the Job's deadline and a little more (its pod may start late), not for days.
    expect(deadlineSeconds).toBeGreaterThan(0);
    expect(Number(url.searchParams.get('X-Amz-Expires'))).toBe(deadlineSeconds + 600);
  });

  it('no container of the build pod gets the S3 keys; only kaniko mounts the push secret', () => {
    const all = [...(template.spec.initContainers ?? []), ...template.spec.containers];
    expect(JSON.stringify(all)).not.toContain('secretKeyRef');
    expect(JSON.stringify(template)).not.toContain('AWS_SECRET_ACCESS_KEY');
    const secretVolumes = template.spec.volumes.filter((v) => v.secret).map((v) => v.name);
    expect(secretVolumes).toEqual(['docker-config']);
    for (const container of all) {
      const mountsSecret = (container.volumeMounts ?? []).some((m) => secretVolumes.includes(m.name));
      expect(mountsSecret, container.name).toBe(container.name === KANIKO_CONTAINER);
    }
  });

  it('the steps that run as 10001 drop every capability under the runtime seccomp profile; every container has a memory limit', () => {
    const sanitize = template.spec.initContainers?.find((c) => c.name === SANITIZE_CONTAINER) as Container;
    for (const container of [install(), sanitize])
      expect(container.securityContext, container.name).toEqual({
        runAsUser: 10001,
        runAsGroup: 10001,
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
    // A build that allocates without end is killed by its own limit, not by the node running out.
    for (const container of [...(template.spec.initContainers ?? []), ...template.spec.containers])
      expect(container.resources?.limits?.memory, container.name).toBe('2Gi');
  });

  it("the build pod uses none of the node's paths or namespaces, and is told no Service's address", () => {
    // The only volumes: empty scratch directories and the one push secret.
    for (const v of template.spec.volumes)
      expect(Object.keys(v).sort(), v.name).toEqual(
        v.name === 'docker-config' ? ['name', 'secret'] : ['emptyDir', 'name'],
      );
    expect(template.spec.hostNetwork).toBeUndefined();
    expect(template.spec.hostPID).toBeUndefined();
    // Service links would put every Service of the controller namespace into the install step's
    // environment, the S3 server and the API among them.
    expect(template.spec.enableServiceLinks).toBe(false);
  });

  it('the Job carries its build key and function labels, so a later commit or another replica finds it by them', () => {
    expect(jobLabels).toMatchObject({
      'sless.dev/build-key': 'a'.repeat(32),
      'sless.dev/function': 'hunter',
      'sless.dev/function-namespace': env.ns,
    });
    expect(template.metadata.labels).toMatchObject({
      'sless.dev/build-key': 'a'.repeat(32),
      'sless.dev/build': expect.stringMatching(/^build-hunter-[0-9a-f]{12}$/),
    });
  });

  it("kaniko's Dockerfile runs nothing, and comes from sless's sanitize step, not the tenant's workspace", () => {
    const sanitize = template.spec.initContainers?.find((c) => c.name === SANITIZE_CONTAINER) as Container;
    const dockerfile = sanitize.env?.find((e) => e.name === DOCKERFILE_ENV)?.value ?? '';
    expect(dockerfile).toBe(finalDockerfile('nodejs20'));
    const instructions = dockerfile
      .split('\n')
      .filter((line) => line.trim() && !line.trim().startsWith('#'))
      .map((line) => line.trim().split(/\s+/)[0]?.toUpperCase());
    expect(instructions).toContain('COPY');
    for (const instruction of instructions) expect(NON_EXECUTING_INSTRUCTIONS).toContain(instruction);
    const args = kaniko().args ?? [];
    expect(args).toContain('--context=dir:///workspace');
    expect(args).toContain(`--dockerfile=${DOCKERFILE_DIR}/Dockerfile`);
    expect(volume('dockerfile')).toEqual({ name: 'dockerfile', emptyDir: {} });
    // Written by the sanitize step, read by kaniko; the install step cannot reach it at all.
    const mounts = (c: Container) => (c.volumeMounts ?? []).filter((m) => m.name === 'dockerfile');
    expect(mounts(install())).toEqual([]);
    expect(mounts(sanitize)).toEqual([{ name: 'dockerfile', mountPath: DOCKERFILE_DIR }]);
    expect(mounts(kaniko())).toEqual([{ name: 'dockerfile', mountPath: DOCKERFILE_DIR, readOnly: true }]);
    expect(kaniko().volumeMounts?.find((m) => m.name === 'workspace')?.readOnly).toBe(true);
  });

  it('replayed as a kubelet would run its init containers, the install step finds no credential and its links out are removed', async () => {
    const replay = async (container: Container) => {
      const [shell, flag, script] = container.command ?? [];
      expect([shell, flag]).toEqual(['sh', '-c']);
      const uid = container.securityContext?.runAsUser ?? 0;
      const mounts: string[] = [];
      for (const mount of container.volumeMounts ?? []) {
        const dir = join(work, mount.name);
        await mkdir(dir, { recursive: true });
        await chown(dir, uid, uid);
        // A container runtime makes a mount point's parents readable to all, as bwrap does not.
        const parent = dirname(mount.mountPath);
        if (parent !== '/') mounts.push('--perms', '0755', '--dir', parent);
        mounts.push('--bind', dir, mount.mountPath);
      }
      const containerEnv = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? '']));
      const args = [
        '--unshare-pid',
        '--unshare-ipc',
        '--unshare-uts',
        '--die-with-parent',
        ...MINIMAL_BWRAP_ROOT,
        '--perms',
        '0755',
        '--dir',
        '/etc',
        '--ro-bind',
        '/etc/ssl',
        '/etc/ssl',
        '--proc',
        '/proc',
        '--dev',
        '/dev',
        ...mounts,
        '--chdir',
        '/',
        '--',
        'setpriv',
        `--reuid=${uid}`,
        `--regid=${uid}`,
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--no-new-privs',
        '--',
        'sh',
        '-c',
        script ?? '',
      ];
      return new Promise<{ code: number | null; text: string }>((resolve) => {
        // Only the container's own env, as the kubelet sets it (plus PATH, which the image provides).
        const child = spawn('bwrap', args, {
          env: { PATH: '/usr/local/bin:/usr/bin:/bin', ...containerEnv },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let text = '';
        child.stdout.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
        });
        child.stderr.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
        });
        child.on('close', (code) => resolve({ code, text }));
      });
    };
    const inits = template.spec.initContainers ?? [];
    expect(inits.map((c) => c.name)).toEqual([INSTALL_CONTAINER, SANITIZE_CONTAINER]);
    const output = await replay(install());
    const sanitized = await replay(inits[1] as Container);
    expect(sanitized.code, sanitized.text).toBe(0);
    expect(sanitized.text).toContain('sless: removed /workspace/server.js, a link out of the build');
    expect(sanitized.text).toContain('sless: removed /workspace/code/docker-dir, a link out of the build');
    // What kaniko will see: no link out of the workspace; links inside it stay.
    expect(() => lstatSync(join(work, 'workspace', 'server.js'))).toThrow(/ENOENT/);
    expect(() => lstatSync(join(work, 'workspace', 'code', 'docker-dir'))).toThrow(/ENOENT/);
    expect(existsSync(join(work, 'workspace', 'code', 'handler.js'))).toBe(true);
    expect(readlinkSync(join(work, 'workspace', 'code', 'inside-link'))).toBe('handler.js');
    // The Dockerfile kaniko reads, as the sanitize step wrote it.
    expect(readFileSync(join(work, 'dockerfile', 'Dockerfile'), 'utf8')).toBe(finalDockerfile('nodejs20'));
    expect(output.code, output.text).toBe(0);
    const line = output.text.split('\n').find((l) => l.startsWith('HUNT-REPORT ')) ?? '';
    expect(line, output.text).not.toBe('');
    const report = JSON.parse(line.slice('HUNT-REPORT '.length)) as {
      ran: boolean;
      files: Record<string, string>;
      env: Record<string, string>;
    };
    expect(report.ran).toBe(true);
    for (const [file, content] of Object.entries(report.files)) expect(content, file).toBe('error ENOENT');
    expect(Object.keys(report.env)).not.toContain('AWS_SECRET_ACCESS_KEY');
    expect(output.text).not.toContain(env.config.s3.secretAccessKey);
    // (The access key id does appear, inside the presigned URL's X-Amz-Credential: it names the key and
    // proves nothing; the signature covers this one GET of this one object until it expires.)
    expect(output.text).not.toContain(env.registrySecrets.push);
    expect(output.text).not.toContain(Buffer.from(env.registrySecrets.push, 'base64').toString());
  });
});
