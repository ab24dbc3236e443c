/**
 * The kube controller's config from flags and environment: a complete one frozen, each required or
 * malformed setting refused by name (S3 endpoint, registry, namespaces, build history, registry map,
 * activator URL), and leader election's default periods, identity and advertised address.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.js';
import { loadKubeControllerConfig } from './kube.js';

const base = {
  SLESS_CONTROLLER_NAMESPACE: 'sless-system',
  SLESS_REGISTRY: 'registry.example.com:5000/sless',
  SLESS_S3_ENDPOINT: 'https://s3.example.com',
  SLESS_S3_BUCKET: 'builds',
  AWS_ACCESS_KEY_ID: 'id',
  AWS_SECRET_ACCESS_KEY: 'secret',
};

const load = (
  env: Record<string, string | undefined>,
  flags: Record<string, string> = { host: '127.0.0.1' },
) => loadKubeControllerConfig(flags, { ...base, ...env });

describe('kube controller config', () => {
  it('accepts a complete configuration and freezes it', () => {
    const config = load({ SLESS_WATCH_NAMESPACES: 'a, b' });
    expect(config.s3.endpoint).toBe('https://s3.example.com');
    expect(config.watchNamespaces).toEqual(['a', 'b']);
    expect(config.imagePullSecrets).toEqual(['sless-registry-pull']);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('serves /fn/ from the proxy thread unless --proxy-thread or SLESS_PROXY_THREAD says off; the flag wins', () => {
    expect(load({}).proxyThread).toBe(true);
    expect(load({ SLESS_PROXY_THREAD: 'off' }).proxyThread).toBe(false);
    expect(load({ SLESS_PROXY_THREAD: 'off' }, { host: '127.0.0.1', 'proxy-thread': 'on' }).proxyThread).toBe(
      true,
    );
    expect(() => load({ SLESS_PROXY_THREAD: 'yes' })).toThrow('--proxy-thread: "yes" must be on or off');
  });

  it('pre-pulls only when SLESS_PREPULL says true, refusing anything but true or false', () => {
    expect(load({}).prepull).toBe(false);
    expect(load({ SLESS_PREPULL: 'true' }).prepull).toBe(true);
    expect(load({ SLESS_PREPULL: ' false ' }).prepull).toBe(false);
    expect(() => load({ SLESS_PREPULL: 'yes' })).toThrow('SLESS_PREPULL: "yes" must be true or false');
  });

  it('cuts streams at SLESS_MAX_STREAM_DURATION or --max-stream-duration (the flag wins), 1h unless set', () => {
    expect(load({}).maxStreamSeconds).toBe(3600);
    expect(load({ SLESS_MAX_STREAM_DURATION: '90s' }).maxStreamSeconds).toBe(90);
    expect(
      load({ SLESS_MAX_STREAM_DURATION: '90s' }, { host: '127.0.0.1', 'max-stream-duration': '2m' })
        .maxStreamSeconds,
    ).toBe(120);
    expect(() => load({ SLESS_MAX_STREAM_DURATION: '2d' })).toThrow('--max-stream-duration: "2d"');
  });

  it.each([
    ['s3.example.com', 'SLESS_S3_ENDPOINT'],
    ['s3.example.com:9000', 'SLESS_S3_ENDPOINT'],
    ['ftp://s3.example.com', 'SLESS_S3_ENDPOINT'],
  ])(
    'refuses the S3 endpoint %s (a full URL is required: a bare host name was once taken as a path)',
    (endpoint, name) => {
      expect(() => load({ SLESS_S3_ENDPOINT: endpoint })).toThrow(ConfigError);
      expect(() => load({ SLESS_S3_ENDPOINT: endpoint })).toThrow(name);
    },
  );

  it.each(['https://registry.example.com', 'registry.example.com/sless:latest', 'Registry.Example.com'])(
    'refuses the registry %s',
    (registry) => {
      expect(() => load({ SLESS_REGISTRY: registry })).toThrow(ConfigError);
    },
  );

  it('needs a controller namespace, a bucket, S3 credentials, and auth beyond loopback', () => {
    expect(() => load({ SLESS_CONTROLLER_NAMESPACE: 'Not_A_Namespace' })).toThrow(ConfigError);
    expect(() => load({ SLESS_S3_BUCKET: '' })).toThrow('SLESS_S3_BUCKET');
    expect(() => load({ AWS_SECRET_ACCESS_KEY: undefined })).toThrow('AWS_SECRET_ACCESS_KEY');
    expect(() => load({ SLESS_WATCH_NAMESPACES: 'ok,Bad' })).toThrow('SLESS_WATCH_NAMESPACES');
    expect(() => load({}, { host: '0.0.0.0' })).toThrow(/SLESS_AUTH/);
  });

  it('keeps 5 builds per function unless told, and deletes registry images only when enabled', () => {
    expect(load({})).toMatchObject({ buildHistory: 5, registryDelete: false });
    expect(load({ SLESS_BUILD_HISTORY: '0', SLESS_REGISTRY_DELETE: 'true' })).toMatchObject({
      buildHistory: 0,
      registryDelete: true,
    });
    expect(load({ SLESS_BUILD_HISTORY: ' 12 ' }).buildHistory).toBe(12);
    for (const bad of ['-1', '2.5', 'five', '1001', '1e2'])
      expect(() => load({ SLESS_BUILD_HISTORY: bad })).toThrow(
        `SLESS_BUILD_HISTORY: "${bad}" must be a whole number from 0 to 1000`,
      );
    expect(() => load({ SLESS_REGISTRY_DELETE: 'yes' })).toThrow(
      'SLESS_REGISTRY_DELETE: "yes" must be true or false',
    );
  });

  it("reads the builds' package mirrors sorted by name, refusing unknown names, malformed values and credentials", () => {
    expect(
      load({
        SLESS_BUILD_PACKAGE_MIRRORS:
          ' PIP_INDEX_URL=http://10.0.0.5:3001/simple/ ; GOPROXY=http://10.0.0.5:3000,direct;NPM_CONFIG_REGISTRY=https://npm.mirror/ ',
      }).buildPackageMirrors,
    ).toEqual([
      { name: 'GOPROXY', value: 'http://10.0.0.5:3000,direct' },
      { name: 'NPM_CONFIG_REGISTRY', value: 'https://npm.mirror/' },
      { name: 'PIP_INDEX_URL', value: 'http://10.0.0.5:3001/simple/' },
    ]);
    expect(load({}).buildPackageMirrors).toEqual([]);
    expect(load({ SLESS_BUILD_PACKAGE_MIRRORS: 'GOSUMDB=off' }).buildPackageMirrors).toEqual([
      { name: 'GOSUMDB', value: 'off' },
    ]);
    const refused = (value: string) => () => load({ SLESS_BUILD_PACKAGE_MIRRORS: value });
    expect(refused('GOPROXY')).toThrow(
      'SLESS_BUILD_PACKAGE_MIRRORS: "GOPROXY" is not NAME=value (e.g. GOPROXY=http://mirror:3000)',
    );
    expect(refused('AWS_SECRET_ACCESS_KEY=x')).toThrow(
      'SLESS_BUILD_PACKAGE_MIRRORS: AWS_SECRET_ACCESS_KEY is not a package mirror setting; use one of GOINSECURE, GONOSUMDB, GOPRIVATE, GOPROXY, GOSUMDB, NPM_CONFIG_REGISTRY, PIP_EXTRA_INDEX_URL, PIP_INDEX_URL, PIP_TRUSTED_HOST',
    );
    expect(refused('GOPROXY=http://a;GOPROXY=http://b')).toThrow(
      'SLESS_BUILD_PACKAGE_MIRRORS: GOPROXY is given twice',
    );
    expect(refused('PIP_INDEX_URL=file:///etc')).toThrow(
      'SLESS_BUILD_PACKAGE_MIRRORS: PIP_INDEX_URL is not an http:// or https:// URL',
    );
    expect(refused('GOPROXY=direct,mirror:3000')).toThrow(
      "SLESS_BUILD_PACKAGE_MIRRORS: GOPROXY's entry 2 is not an http:// or https:// URL",
    );
    // The credential is refused, and never repeated in the error.
    const withPassword = refused('GOPROXY=http://10.0.0.5:3000|https://bot:hunter2@goproxy.corp');
    expect(withPassword).toThrow(
      "SLESS_BUILD_PACKAGE_MIRRORS: GOPROXY's entry 2 carries a credential, which the tenant code of every build could read; use a mirror that needs none",
    );
    expect(() => withPassword()).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('hunter2') }),
    );
    expect(refused('NPM_CONFIG_REGISTRY=https://token@npm.corp/')).toThrow(
      'NPM_CONFIG_REGISTRY carries a credential',
    );
    expect(refused('GOPRIVATE=a\u0007b')).toThrow(
      'SLESS_BUILD_PACKAGE_MIRRORS: GOPRIVATE holds a control character',
    );
  });

  it('reads the kaniko registry map and the function route, refusing malformed values', () => {
    const config = load({
      SLESS_KANIKO_REGISTRY_MAP: 'index.docker.io=mirror.local:5000/dockerhub; gcr.io=mirror.local:5000',
      SLESS_FUNCTION_ROUTE: 'cluster-ip',
    });
    expect(config.kanikoRegistryMap).toEqual([
      'index.docker.io=mirror.local:5000/dockerhub',
      'gcr.io=mirror.local:5000',
    ]);
    expect(config.functionRoute).toBe('cluster-ip');
    expect(load({}).kanikoRegistryMap).toEqual([]);
    expect(load({}).functionRoute).toBe('service-dns');
    expect(() => load({ SLESS_KANIKO_REGISTRY_MAP: 'index.docker.io' })).toThrow('SLESS_KANIKO_REGISTRY_MAP');
    expect(() => load({ SLESS_KANIKO_REGISTRY_MAP: 'docker.io=http://m' })).toThrow('"docker.io=http://m"');
    expect(() => load({ SLESS_FUNCTION_ROUTE: 'dns' })).toThrow('SLESS_FUNCTION_ROUTE');
  });

  it("reaches /fn/ for cron calls at the controller namespace's sless-api Service unless told", () => {
    expect(load({}).activatorUrl).toBe('http://sless-api.sless-system.svc');
    expect(load({ SLESS_ACTIVATOR_URL: 'http://10.0.0.9:8080/' }).activatorUrl).toBe('http://10.0.0.9:8080');
    expect(() => load({ SLESS_ACTIVATOR_URL: 'sless-api.sless-system.svc' })).toThrow(
      'SLESS_ACTIVATOR_URL: "sless-api.sless-system.svc" is not a full URL',
    );
  });

  it('leader election: client-go periods by default, the pod name and address from the downward API', () => {
    const config = load(
      { POD_NAME: 'sless-controller-7d9f-abcde', POD_IP: '10.1.2.3' },
      { port: '8080', host: '127.0.0.1' },
    );
    expect(config.leaderElection).toEqual({
      enabled: true,
      leaseName: 'sless-controller',
      identity: 'sless-controller-7d9f-abcde',
      advertiseUrl: 'http://10.1.2.3:8080',
      timing: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
      replicaKeySecret: 'sless-replica-key',
    });
    expect(load({ POD_IP: 'fd00::5' }, { port: '9000', host: '127.0.0.1' }).leaderElection.advertiseUrl).toBe(
      'http://[fd00::5]:9000',
    );
    expect(load({ SLESS_LEADER_ELECTION: 'false' }).leaderElection.enabled).toBe(false);
  });

  it.each([
    [
      { SLESS_LEASE_DURATION: '10s', SLESS_LEASE_RENEW_DEADLINE: '10s' },
      'SLESS_LEASE_RENEW_DEADLINE must be shorter',
    ],
    [{ SLESS_LEASE_RETRY_PERIOD: '10s' }, 'SLESS_LEASE_RETRY_PERIOD must be shorter'],
    [{ SLESS_LEASE_DURATION: 'soon' }, 'SLESS_LEASE_DURATION: "soon"'],
    [{ SLESS_ADVERTISE_URL: '10.1.2.3:8080' }, 'SLESS_ADVERTISE_URL'],
    [
      { SLESS_REPLICA_KEY_SECRET: 'Not_A_Name' },
      'SLESS_REPLICA_KEY_SECRET: "Not_A_Name" is not a Secret name',
    ],
  ])('refuses leader-election settings %o', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
