/**
 * Secrets on the kube platform against a real kube-apiserver + etcd (the kubelet and kaniko are
 * played, see harness.ts): a Function's secretRef variables and spec.secrets become secretKeyRef
 * variables and read-only Secret volumes, never values; the values' keyed hash in the pod template
 * rolls the Deployment on a rotation; a SOPS Secret file in git becomes a Secret of the source's
 * namespace, decrypted with the age key from the controller namespace; a missing secret makes no
 * Deployment and records an Event; a file naming another namespace, or one read with no age key
 * there, says so and breaks nothing that serves; and no value appears in any object the controller
 * writes, an Event, a status, an API answer or a log line. What every platform does with a secret
 * (missing, a missing key, another namespace's, a rotation serving the new value without a build,
 * SOPS files decrypted or refused) is the platform contract's (test/platform/contract.ts).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FunctionStatus, GitSourceStatus } from '../../src/core/resources.js';
import { type KubeSystem, startKubeSystem } from '../../src/main.js';
import { getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, SECRET } from '../../src/platform/kube/resource-types.js';
import { functionManifest, git, gitSource, nodeHandler, TestRepo, tempDir } from '../helpers/git.js';
import { startGitHttpServer } from '../helpers/git-http-server.js';
import { ageKey, SOPS, secretYaml, sopsAvailable, sopsEncrypt } from '../helpers/sops.js';
import { completeBuild, eventually, type KubeEnv, kubeEnv, playHealthyKubelet, specOf } from './harness.js';

const STRIPE_1 = `sk_live_one_${randomBytes(12).toString('hex')}`;
const STRIPE_2 = `sk_live_two_${randomBytes(12).toString('hex')}`;
const DB_PASSWORD = `db_pw_${randomBytes(12).toString('hex')}`;
const VALUES = [STRIPE_1, STRIPE_2, DB_PASSWORD];
const b64 = (s: string) => Buffer.from(s).toString('base64');

interface PodTemplate {
  metadata: { annotations?: Record<string, string> };
  spec: {
    volumes?: unknown[];
    containers: { env: { name: string; value?: string; valueFrom?: unknown }[]; volumeMounts?: unknown[] }[];
  };
}
const templateOf = (d: KubeObject | undefined) => specOf<{ template: PodTemplate }>(d).template;

describe.skipIf(!sopsAvailable())('kube platform: secrets', () => {
  let env: KubeEnv;
  let work: TestRepo;
  let gitServer: Awaited<ReturnType<typeof startGitHttpServer>>;
  let system: KubeSystem;
  let stopKubelet: () => void;
  let recipient: string;
  let keys: string;
  let goodSops: string;
  let operatorKey: string;
  let first: string;
  const logLines: string[] = [];
  const answers: string[] = [];

  const push = () => git(work.dir, 'push', '--quiet', 'origin', 'main');
  const status = async (name: string) =>
    (await system.store.get('Function', env.ns, name))?.status as FunctionStatus | undefined;
  const ready = async (name: string) => (await status(name))?.conditions?.find((c) => c.type === 'Ready');
  const sourceReady = async () =>
    (
      (await system.store.get('GitSource', env.ns, 'repo'))?.status as GitSourceStatus | undefined
    )?.conditions?.find((c) => c.type === 'Ready');
  const deployment = (name: string) => getObject<KubeObject>(env.http, DEPLOYMENT, env.ns, name);
  const putSecret = (name: string, stringData: Record<string, string>, namespace = env.ns) =>
    env.http.request('PATCH', `/api/v1/namespaces/${namespace}/secrets/${name}`, {
      query: { fieldManager: 'test-admin', force: true },
      contentType: 'application/apply-patch+yaml',
      body: { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData },
    });
  const api = async (path: string) => {
    const response = await fetch(`${system.url}${path}`);
    const text = await response.text();
    answers.push(`${path} ${response.status} ${text}`);
    return { status: response.status, text };
  };

  beforeAll(async () => {
    env = await kubeEnv('secrets');
    keys = await tempDir('age');
    const key = await ageKey(keys, 'operator.key');
    recipient = key.recipient;
    goodSops = await sopsEncrypt(keys, secretYaml('db', { password: DB_PASSWORD }), recipient);
    // The operator's age key, as Flux's sops-age Secret, in the controller namespace.
    const { readFile } = await import('node:fs/promises');
    operatorKey = await readFile(key.file, 'utf8');
    await putSecret('sless-sops-age', { 'age.agekey': operatorKey }, env.controllerNs);
    await putSecret('payments', { stripe: STRIPE_1, other: 'x' });
    const root = await tempDir('kube-git-secrets');
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', 'fns.git');
    gitServer = await startGitHttpServer(root);
    work = await TestRepo.create({
      'pay/function.yaml': functionManifest('pay', {
        env: { PLAIN: 'visible', STRIPE: { secretRef: { name: 'payments', key: 'stripe' } } },
        secrets: [{ name: 'payments', mountPath: '/var/sless/secrets/payments' }],
      }),
      'pay/handler.js': nodeHandler('return 1;'),
      'gitsecret/function.yaml': functionManifest('gitsecret', {
        env: { DB_PASSWORD: { secretRef: { name: 'db', key: 'password' } } },
      }),
      'gitsecret/handler.js': nodeHandler('return 1;'),
      'gitsecret/db.sops.yaml': goodSops,
      // The push secret exists in the controller namespace only: it must not resolve here.
      'stranger/function.yaml': functionManifest('stranger', {
        env: { X: { secretRef: { name: 'sless-registry-push', key: '.dockerconfigjson' } } },
      }),
      'stranger/handler.js': nodeHandler('return 1;'),
    });
    await git(work.dir, 'remote', 'add', 'origin', join(root, 'fns.git'));
    await push();
    first = await git(work.dir, 'rev-parse', 'HEAD');
    stopKubelet = playHealthyKubelet(env.http, env.ns);
    const capture = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    system = await startKubeSystem(
      { ...env.config, sopsBinary: SOPS },
      { logger: pino({ level: 'debug' }, capture), kubeConfig: env.cluster.kubeConfig, pollMs: 100 },
    );
    await system.store.apply(gitSource('repo', env.ns, `${gitServer.url}/fns.git`));
    for (const name of ['pay', 'gitsecret', 'stranger']) await completeBuild(env, name, first, name);
  }, 180_000);

  afterAll(async () => {
    stopKubelet?.();
    await system?.stop();
    await gitServer?.close();
    await work?.remove();
    await env?.close();
  });

  it('projects secretRef variables as secretKeyRef and spec.secrets as a read-only volume, with the values’ hash', async () => {
    await eventually('pay Ready', async () => (await status('pay'))?.phase === 'Ready');
    const template = templateOf(await deployment('pay'));
    const container = template.spec.containers[0];
    expect(container?.env.filter((e) => ['PLAIN', 'STRIPE'].includes(e.name))).toEqual([
      { name: 'PLAIN', value: 'visible' },
      { name: 'STRIPE', valueFrom: { secretKeyRef: { name: 'payments', key: 'stripe' } } },
    ]);
    expect(template.spec.volumes).toEqual([
      { name: 'secret-0', secret: { secretName: 'payments', defaultMode: 0o444 } },
    ]);
    expect(container?.volumeMounts).toEqual([
      { name: 'secret-0', mountPath: '/var/sless/secrets/payments', readOnly: true },
    ]);
    expect(template.metadata.annotations?.['sless.dev/secrets-hash']).toMatch(/^[0-9a-f]{16}$/);
  });

  it("a rotation changes the pod template's secrets hash, so the Deployment rolls", async () => {
    // Quiet first: then only the Secret watch can queue pay again, and the roll below is its doing.
    await system.controller.idle();
    const before = await deployment('pay');
    const hash = templateOf(before).metadata.annotations?.['sless.dev/secrets-hash'];
    await putSecret('payments', { stripe: STRIPE_2, other: 'x' });
    const after = await eventually('template rolled', async () => {
      const d = await deployment('pay');
      return templateOf(d).metadata.annotations?.['sless.dev/secrets-hash'] !== hash ? d : undefined;
    });
    expect(after.metadata.generation).toBeGreaterThan(before?.metadata.generation ?? 0);
    expect(templateOf(after).metadata.annotations?.['sless.dev/secrets-hash']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('a SOPS Secret in git becomes a Secret of the source namespace, decrypted with the operator key', async () => {
    const secret = await eventually('db Secret', () =>
      getObject<KubeObject & { data?: Record<string, string> }>(env.http, SECRET, env.ns, 'db'),
    );
    expect(secret.data).toEqual({ password: b64(DB_PASSWORD) });
    expect(secret.metadata.labels).toMatchObject({ 'sless.dev/sops-source': 'repo' });
    await eventually('gitsecret Ready', async () => (await status('gitsecret'))?.phase === 'Ready');
  });

  it('a reference to a Secret only the controller namespace has makes no Deployment and records an Event', async () => {
    await eventually('stranger waits', async () => (await ready('stranger'))?.reason === 'SecretNotFound');
    expect(await deployment('stranger')).toBeUndefined();
    await eventually('SecretNotFound Event', async () => {
      const events = await env.http.request<{ items: { reason: string }[] }>(
        'GET',
        `/api/v1/namespaces/${env.ns}/events`,
      );
      return events.items.some((e) => e.reason === 'SecretNotFound');
    });
  });

  // A tampered file and one for another key are refused in the platform contract's 'sops-secret' case
  // (test/platform); here, what is kube's own: the controller namespace unreached, and no key at all.
  it('a SOPS file naming another namespace, or with no operator key to read it, is rejected; what serves stays', async () => {
    const cases: [string, string, RegExp][] = [
      [
        'other namespace',
        await sopsEncrypt(keys, secretYaml('db', { password: 'elsewhere' }, env.controllerNs), recipient),
        new RegExp(`gitsecret/db\\.sops\\.yaml#0 metadata\\.namespace: must be omitted or "${env.ns}"`),
      ],
      [
        'no age key at all',
        await sopsEncrypt(keys, secretYaml('db', { password: DB_PASSWORD }), recipient),
        new RegExp(
          `gitsecret/db\\.sops\\.yaml#0: cannot decrypt this SOPS file: no age key: create Secret sless-sops-age in ${env.controllerNs}`,
        ),
      ],
    ];
    for (const [what, content, expected] of cases) {
      if (what === 'no age key at all')
        await env.http.request('DELETE', `/api/v1/namespaces/${env.controllerNs}/secrets/sless-sops-age`);
      await work.commit({ 'gitsecret/db.sops.yaml': content }, what);
      await push();
      await system.controller.syncNow(env.ns, 'repo');
      await eventually(`${what} rejected`, async () => (await sourceReady())?.reason === 'ValidationFailed');
      expect((await sourceReady())?.message, what).toMatch(expected);
      const db = await getObject<KubeObject & { data?: Record<string, string> }>(
        env.http,
        SECRET,
        env.ns,
        'db',
      );
      expect(db?.data, what).toEqual({ password: b64(DB_PASSWORD) });
      expect((await status('gitsecret'))?.phase, what).toBe('Ready');
    }
    expect(await getObject(env.http, SECRET, env.controllerNs, 'db')).toBeUndefined();
    // The operator's key back: the same file now decrypts (the key's version is part of the cache key).
    await putSecret('sless-sops-age', { 'age.agekey': operatorKey }, env.controllerNs);
    await system.controller.syncNow(env.ns, 'repo', { force: true });
    await eventually('synced with the key back', async () => (await sourceReady())?.reason === 'Synced');
  });

  it('no value appears in what the controller writes, its Events, status, API answers or log lines', async () => {
    for (const name of ['pay', 'gitsecret', 'stranger']) {
      await api(`/v1/namespaces/${env.ns}/functions/${name}`);
      await api(`/v1/namespaces/${env.ns}/functions/${name}/builds?tail=200`);
    }
    await api(`/v1/namespaces/${env.ns}/sources`);
    await api('/metrics');
    // On kube the store is Kubernetes Secrets: the local store's API says where to go instead.
    const local = await api(`/v1/namespaces/${env.ns}/secrets`);
    expect(local.status).toBe(404);
    expect(local.text).toContain('kubectl create secret');
    const objects: string[] = [];
    for (const ns of [env.ns, env.controllerNs])
      for (const path of [
        `/apis/apps/v1/namespaces/${ns}/deployments`,
        `/api/v1/namespaces/${ns}/services`,
        `/api/v1/namespaces/${ns}/events`,
        `/apis/batch/v1/namespaces/${ns}/jobs`,
        `/apis/batch/v1/namespaces/${ns}/cronjobs`,
        `/api/v1/namespaces/${ns}/configmaps`,
        `/apis/sless.dev/v1alpha1/namespaces/${ns}/functions`,
        `/apis/sless.dev/v1alpha1/namespaces/${ns}/gitsources`,
      ])
        objects.push(JSON.stringify(await env.http.request('GET', path)));
    const haystacks: [string, string][] = [
      ['objects the controller wrote', objects.join('\n')],
      ['API answers', answers.join('\n')],
      ['sless log lines', logLines.join('')],
    ];
    expect(logLines.join('')).toContain('source synced');
    for (const value of VALUES)
      for (const form of [value, b64(value)])
        for (const [where, text] of haystacks)
          expect(text.includes(form), `${where} holds a secret value`).toBe(false);
  });
});
