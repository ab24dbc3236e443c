/**
 * sless's own kubeconfig reader against @kubernetes/client-node: each simple shape (token, client
 * certificates, files, plain HTTP) gives exactly client-node's request options, the current context wins,
 * exec plugins and proxies are left to client-node, token files are read again each minute, in-cluster
 * credentials match loadFromCluster, and the lookup order and its refusals.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import {
  inClusterCredentials,
  loadKubeCredentials,
  readSimpleKubeconfig,
  SERVICE_ACCOUNT_DIR,
  StaticCredentials,
} from './kubeconfig.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sless-kubeconfig-'));
});
afterEach(() => {
  vi.unstubAllEnvs();
  rmSync(dir, { recursive: true, force: true });
});

const b64 = (text: string) => Buffer.from(text).toString('base64');

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown> | undefined): string {
  const file = join(dir, 'config');
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'here',
      contexts: [
        { name: 'elsewhere', context: { cluster: 'other', user: 'other' } },
        { name: 'here', context: { cluster: 'c', ...(user ? { user: 'u' } : {}), namespace: 'ns' } },
      ],
      clusters: [
        { name: 'other', cluster: { server: 'https://wrong.example' } },
        { name: 'c', cluster },
      ],
      users: [{ name: 'other', user: { token: 'wrong' } }, ...(user ? [{ name: 'u', user }] : [])],
    }),
  );
  return file;
}

/**
 * What a credentials object puts on one request's options. client-node also makes an Agent from them
 * on every call, which KubeHttp does not use (it keeps one keep-alive agent): left out.
 */
async function optionsOf(credentials: {
  applyToHTTPSOptions(o: RequestOptions): Promise<void>;
}): Promise<RequestOptions> {
  const options: RequestOptions = {};
  await credentials.applyToHTTPSOptions(options);
  delete options.agent;
  // client-node adds an empty header object where there is no token; KubeHttp reads both alike.
  if (options.headers && Object.keys(options.headers).length === 0) delete options.headers;
  return options;
}

async function clientNodeOptions(file: string): Promise<{ server: string; options: RequestOptions }> {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return { server: kc.getCurrentCluster()?.server ?? '', options: await optionsOf(kc) };
}

describe('readSimpleKubeconfig', () => {
  // Each shape read here must give exactly the request options client-node gives for the same file.
  const shapes: Record<string, [Record<string, unknown>, Record<string, unknown> | undefined]> = {
    'token and CA data': [
      { server: 'https://10.0.0.1:6443', 'certificate-authority-data': b64('CA PEM') },
      { token: 'secret-token' },
    ],
    'client certificate data': [
      { server: 'https://api.example:443', 'certificate-authority-data': b64('CA PEM') },
      { 'client-certificate-data': b64('CERT PEM'), 'client-key-data': b64('KEY PEM') },
    ],
    'files relative to the kubeconfig': [
      { server: 'https://api.example', 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kube' },
      { 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' },
    ],
    'insecure plain HTTP with a password': [
      { server: 'http://127.0.0.1:8080', 'insecure-skip-tls-verify': true },
      { username: 'admin', password: 'pw' },
    ],
  };
  for (const [shape, [cluster, user]] of Object.entries(shapes))
    it(`reads ${shape} as client-node does`, async () => {
      mkdirSync(join(dir, 'pki'));
      for (const name of ['ca.crt', 'client.crt', 'client.key'])
        writeFileSync(join(dir, 'pki', name), `${name} PEM`);
      const file = kubeconfig(cluster, user);
      const ours = readSimpleKubeconfig(file);
      expect(ours).toBeInstanceOf(StaticCredentials);
      const theirs = await clientNodeOptions(file);
      expect(ours?.getCurrentCluster().server).toBe(theirs.server);
      expect(await optionsOf(ours as StaticCredentials)).toEqual(theirs.options);
    });

  it('gives the token and CA of the current context, not of another', async () => {
    const file = kubeconfig(
      { server: 'https://10.0.0.1:6443', 'certificate-authority-data': b64('CA PEM') },
      { token: 'secret-token' },
    );
    const options = await optionsOf(readSimpleKubeconfig(file) as StaticCredentials);
    expect(options.headers).toEqual({ Authorization: 'Bearer secret-token' });
    expect(options.ca?.toString()).toBe('CA PEM');
    expect(readSimpleKubeconfig(file)?.getCurrentCluster().server).toBe('https://10.0.0.1:6443');
  });

  it('applies the CA of a context without a user, and no credentials', async () => {
    const file = kubeconfig({ server: 'https://a', 'certificate-authority-data': b64('CA PEM') }, undefined);
    const options = await optionsOf(readSimpleKubeconfig(file) as StaticCredentials);
    expect(options).toEqual({ ca: Buffer.from('CA PEM') });
  });

  it('leaves exec plugins, auth providers and proxies to client-node', () => {
    const exec = { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'aws', args: ['eks'] } };
    expect(readSimpleKubeconfig(kubeconfig({ server: 'https://a' }, exec))).toBeUndefined();
    expect(
      readSimpleKubeconfig(kubeconfig({ server: 'https://a' }, { 'auth-provider': { name: 'oidc' } })),
    ).toBeUndefined();
    expect(
      readSimpleKubeconfig(kubeconfig({ server: 'https://a', 'proxy-url': 'http://p' }, { token: 't' })),
    ).toBeUndefined();
    expect(readSimpleKubeconfig(kubeconfig({ server: 'https://a' }, { as: 'someone', token: 't' }))).toBe(
      undefined,
    );
  });
});

describe('StaticCredentials', () => {
  it('reads a token file again once a minute, trimmed, as client-go does', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'first\n');
    let now = 1_000_000;
    const credentials = new StaticCredentials({ server: 'https://a' }, { tokenFile }, { now: () => now });
    expect((await optionsOf(credentials)).headers).toEqual({ Authorization: 'Bearer first' });
    writeFileSync(tokenFile, 'rotated');
    now += 59_000;
    expect((await optionsOf(credentials)).headers).toEqual({ Authorization: 'Bearer first' });
    now += 2_000;
    expect((await optionsOf(credentials)).headers).toEqual({ Authorization: 'Bearer rotated' });
  });
});

describe('inClusterCredentials', () => {
  it('reads the service account as client-node loadFromCluster does', async () => {
    const account = join(dir, SERVICE_ACCOUNT_DIR);
    mkdirSync(account, { recursive: true });
    writeFileSync(join(account, 'token'), 'sa-token');
    writeFileSync(join(account, 'ca.crt'), 'CLUSTER CA');
    const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' };
    const ours = inClusterCredentials(env, account);
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    const kc = new KubeConfig();
    kc.loadFromCluster(dir);
    expect(ours?.getCurrentCluster().server).toBe('https://[fd00::1]:443');
    expect(ours?.getCurrentCluster().server).toBe(kc.getCurrentCluster()?.server);
    const options = await optionsOf(ours as StaticCredentials);
    expect(options).toEqual(await optionsOf(kc));
    expect(options.headers).toEqual({ Authorization: 'Bearer sa-token' });
    expect(options.ca?.toString()).toBe('CLUSTER CA');
  });

  it('is not there outside a pod', () => {
    expect(inClusterCredentials({}, dir)).toBeUndefined();
  });
});

describe('loadKubeCredentials', () => {
  it('takes KUBECONFIG first, then ~/.kube/config, then the service account', async () => {
    const home = join(dir, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    const account = join(dir, 'account');
    mkdirSync(account);
    writeFileSync(join(account, 'token'), 't');
    writeFileSync(join(account, 'ca.crt'), 'ca');
    const env = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const server = async (e: NodeJS.ProcessEnv) =>
      (await loadKubeCredentials(e, { home, accountDir: account })).getCurrentCluster()?.server;

    expect(await server(env)).toBe('https://10.0.0.1:443');
    writeFileSync(
      join(home, '.kube', 'config'),
      readFileSync(kubeconfig({ server: 'https://home.example' }, { token: 't' }), 'utf8'),
    );
    expect(await server(env)).toBe('https://home.example');
    const explicit = kubeconfig({ server: 'https://explicit.example' }, { token: 't' });
    expect(await server({ ...env, KUBECONFIG: explicit })).toBe('https://explicit.example');
  });

  it('refuses to start without credentials, or in a pod without the API server address, saying which', async () => {
    const home = join(dir, 'nohome');
    const account = join(dir, 'noaccount');
    await expect(loadKubeCredentials({}, { home, accountDir: account })).rejects.toThrow(
      `no Kubernetes credentials: KUBECONFIG is not set, ${join(home, '.kube', 'config')} does not exist, and there is no service account token at ${join(account, 'token')}`,
    );
    mkdirSync(account);
    writeFileSync(join(account, 'token'), 't');
    await expect(
      loadKubeCredentials({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, { home, accountDir: account }),
    ).rejects.toThrow(/KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set/);
  });

  it('hands what it does not read to client-node', async () => {
    const file = kubeconfig({ server: 'https://exec.example' }, { exec: { command: 'true' } });
    // client-node reads the process's own environment.
    vi.stubEnv('KUBECONFIG', file);
    const credentials = await loadKubeCredentials();
    expect(credentials).toBeInstanceOf(KubeConfig);
    expect(credentials.getCurrentCluster()?.server).toBe('https://exec.example');
  });
});
