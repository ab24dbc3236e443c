// Proves that each server of the test cluster is the real thing: real API machinery (CRDs, server-side
// apply conflicts, status subresource, watches, TokenRequest + RBAC), a real S3 API and a real registry.
import { createHash, randomBytes } from 'node:crypto';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import {
  ApiException,
  ApiextensionsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  VersionApi,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getTestCluster, type SharedTestCluster } from './shared.ts';

const GROUP = 'smoke.sless.dev';
const VERSION = 'v1';
const PLURAL = 'widgets';

interface Widget extends KubernetesObject {
  spec?: { size?: number; color?: string };
  status?: { phase?: string };
}

const crd: V1CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${PLURAL}.${GROUP}` },
  spec: {
    group: GROUP,
    scope: 'Namespaced',
    names: { plural: PLURAL, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                properties: { size: { type: 'integer', minimum: 1 }, color: { type: 'string' } },
              },
              status: { type: 'object', properties: { phase: { type: 'string' } } },
            },
          },
        },
      },
    ],
  },
};

function statusOf(e: unknown): number {
  if (e instanceof ApiException) return e.code;
  throw e;
}

/** Resolves to the HTTP status of a failing call; fails the test if the call succeeds. */
async function rejectionCode(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    return statusOf(e);
  }
  throw new Error('expected the call to be rejected, but it succeeded');
}

async function eventually<T>(what: string, fn: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) {
        throw new Error(
          `${what}: still failing after ${timeoutMs} ms: ${e instanceof Error ? e.message : e}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

let cluster: SharedTestCluster;
let kc: KubeConfig;
let ns: string;

beforeAll(async () => {
  cluster = await getTestCluster();
  kc = cluster.kubeConfig;
  ns = `smoke-${randomBytes(4).toString('hex')}`;
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
});

afterAll(async () => {
  await cluster?.release();
});

describe('kube-apiserver and etcd', () => {
  it('report the pinned versions', async () => {
    const v = await kc.makeApiClient(VersionApi).getCode();
    expect(v.gitVersion).toBe(cluster.versions.kubernetes);
    expect(`v${v.major}.${v.minor}`).toBe(cluster.versions.kubernetes.split('.').slice(0, 2).join('.'));
    const etcd = (await (await fetch(`${cluster.etcd.url}/version`)).json()) as { etcdserver: string };
    expect(`v${etcd.etcdserver}`).toBe(cluster.versions.etcd);
  });

  it('rejects requests without credentials (authentication is on)', async () => {
    const anon = new KubeConfig();
    anon.loadFromOptions({
      clusters: [
        { name: 'c', server: cluster.apiServerUrl, caData: Buffer.from(cluster.caCert).toString('base64') },
      ],
      users: [{ name: 'u', token: 'not-a-valid-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(await rejectionCode(anon.makeApiClient(CoreV1Api).listNamespace())).toBe(401);
  });

  describe('custom resources', () => {
    const objects = (): KubernetesObjectApi => KubernetesObjectApi.makeApiClient(kc);
    const widget = (name: string, spec: Widget['spec']): Widget => ({
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'Widget',
      metadata: { name, namespace: ns },
      spec,
    });

    beforeAll(async () => {
      const ext = kc.makeApiClient(ApiextensionsV1Api);
      await ext.createCustomResourceDefinition({ body: crd }).catch((e: unknown) => {
        if (statusOf(e) !== 409) throw e; // another run of this file already installed it
      });
      await eventually('CRD Established', async () => {
        const got = await ext.readCustomResourceDefinition({ name: crd.metadata?.name ?? '' });
        const established = got.status?.conditions?.find((c) => c.type === 'Established');
        if (established?.status !== 'True') throw new Error('not established yet');
      });
      // Discovery can lag a moment behind Established.
      await eventually('Widget kind served', () =>
        kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: PLURAL,
        }),
      );
    });

    it('creates a custom resource and validates it against the CRD schema', async () => {
      const created = await objects().create(widget('created', { size: 2, color: 'red' }));
      expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
      const read = await objects().read<Widget>({
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'Widget',
        metadata: { name: 'created', namespace: ns },
      });
      expect(read.spec).toEqual({ size: 2, color: 'red' });
      // size has minimum: 1 in the schema: a real API server rejects 0 with 422.
      expect(await rejectionCode(objects().create(widget('invalid', { size: 0 })))).toBe(422);
    });

    it('server-side apply records the field manager and detects conflicts', async () => {
      const applied = await objects().patch(
        widget('applied', { size: 1, color: 'blue' }),
        undefined,
        undefined,
        'manager-a',
        false,
        PatchStrategy.ServerSideApply,
      );
      expect(applied.spec).toEqual({ size: 1, color: 'blue' });
      const managers = applied.metadata?.managedFields?.map((f) => [f.manager, f.operation]);
      expect(managers).toEqual([['manager-a', 'Apply']]);

      // A second manager changing a field owned by manager-a, without force: 409 Conflict.
      const code = await rejectionCode(
        objects().patch(
          widget('applied', { size: 5 }),
          undefined,
          undefined,
          'manager-b',
          false,
          PatchStrategy.ServerSideApply,
        ),
      );
      expect(code).toBe(409);

      // With force, manager-b takes the field over.
      const forced = await objects().patch(
        widget('applied', { size: 5 }),
        undefined,
        undefined,
        'manager-b',
        true,
        PatchStrategy.ServerSideApply,
      );
      expect(forced.spec).toEqual({ size: 5, color: 'blue' });
      expect(forced.metadata?.managedFields?.map((f) => f.manager).sort()).toEqual([
        'manager-a',
        'manager-b',
      ]);
    });

    it('status goes through the status subresource only', async () => {
      const custom = kc.makeApiClient(CustomObjectsApi);
      const created = await objects().create(widget('with-status', { size: 3 }));
      const generation = created.metadata?.generation;
      const ref = { group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: 'with-status' };

      const patched = (await custom.patchNamespacedCustomObjectStatus(
        { ...ref, body: { status: { phase: 'Ready' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )) as Widget;
      expect(patched.status?.phase).toBe('Ready');
      expect(patched.metadata?.generation).toBe(generation);

      // Writing status through the main resource is ignored when the status subresource is on.
      const main = (await custom.patchNamespacedCustomObject(
        { ...ref, body: { status: { phase: 'Bogus' }, spec: { size: 4 } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )) as Widget;
      expect(main.spec?.size).toBe(4);
      expect(main.status?.phase).toBe('Ready');
      expect(main.metadata?.generation).toBe((generation ?? 0) + 1);
    });

    it('a watch receives ADDED, MODIFIED and DELETED', async () => {
      const custom = kc.makeApiClient(CustomObjectsApi);
      const list = (await custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: PLURAL,
      })) as { metadata: { resourceVersion: string } };
      const events: Array<[string, string | undefined]> = [];
      let onDeleted: () => void = () => {};
      const deleted = new Promise<void>((resolve) => {
        onDeleted = resolve;
      });
      let watchError: unknown;
      let aborting = false;
      const ctl = await new Watch(kc).watch(
        `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}`,
        { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: false },
        (phase: string, obj: Widget) => {
          if (obj.metadata?.name !== 'watched') return;
          events.push([phase, obj.spec?.color]);
          if (phase === 'DELETED') onDeleted();
        },
        (err: unknown) => {
          if (!aborting) watchError = err ?? new Error('watch ended early');
        },
      );
      try {
        await objects().create(widget('watched', { size: 1, color: 'green' }));
        await objects().patch(
          widget('watched', { size: 1, color: 'yellow' }),
          undefined,
          undefined,
          'watch-test',
          true,
          PatchStrategy.ServerSideApply,
        );
        await objects().delete(widget('watched', undefined));
        await Promise.race([
          deleted,
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`no DELETED event; got ${JSON.stringify(events)}`)), 15_000),
          ),
        ]);
      } finally {
        aborting = true;
        ctl.abort();
      }
      expect(watchError ?? null).toBeNull();
      expect(events).toEqual([
        ['ADDED', 'green'],
        ['MODIFIED', 'yellow'],
        ['DELETED', 'yellow'],
      ]);
    });
  });

  it('a ServiceAccount token is denied without a RoleBinding and allowed with one', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'reader' } } });
    const tr = await core.createNamespacedServiceAccountToken({
      namespace: ns,
      name: 'reader',
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const token = tr.status?.token ?? '';
    expect(token.split('.')).toHaveLength(3); // a signed JWT

    const saKc = new KubeConfig();
    saKc.loadFromOptions({
      clusters: [
        { name: 'c', server: cluster.apiServerUrl, caData: Buffer.from(cluster.caCert).toString('base64') },
      ],
      users: [{ name: 'sa', token }],
      contexts: [{ name: 'sa', cluster: 'c', user: 'sa', namespace: ns }],
      currentContext: 'sa',
    });
    // The token authenticates (so a denial below is authorization, not authentication)...
    const review = await saKc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${ns}:reader`);
    // ...but RBAC grants nothing yet.
    const saCore = saKc.makeApiClient(CoreV1Api);
    expect(await rejectionCode(saCore.listNamespacedConfigMap({ namespace: ns }))).toBe(403);

    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'reader-can-read' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
      },
    });
    // The RBAC authorizer's informers see the binding within moments.
    const list = await eventually('list allowed after binding', () =>
      saCore.listNamespacedConfigMap({ namespace: ns }),
    );
    expect(Array.isArray(list.items)).toBe(true);
    // The binding is scoped: other namespaces stay forbidden.
    expect(await rejectionCode(saCore.listNamespacedConfigMap({ namespace: 'default' }))).toBe(403);
  });
});

describe('S3 (versitygw)', () => {
  const client = (secret?: string): S3Client =>
    new S3Client({
      endpoint: cluster.s3.endpoint,
      region: cluster.s3.region,
      forcePathStyle: true,
      credentials: {
        accessKeyId: cluster.s3.accessKeyId,
        secretAccessKey: secret ?? cluster.s3.secretAccessKey,
      },
    });

  it('stores and returns a 5 MiB object byte for byte', async () => {
    const s3 = client();
    const bucket = `smoke-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const buckets = await s3.send(new ListBucketsCommand({}));
    expect(buckets.Buckets?.map((b) => b.Name)).toContain(bucket);

    const body = randomBytes(5 * 1024 * 1024);
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: 'dir/blob.bin',
        Body: body,
        ContentType: 'application/x-test',
      }),
    );
    expect(put.ETag).toBe(`"${createHash('md5').update(body).digest('hex')}"`);

    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'dir/blob.bin' }));
    expect(head.ContentLength).toBe(body.length);

    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'dir/blob.bin' }));
    const bytes = Buffer.from((await got.Body?.transformToByteArray()) ?? new Uint8Array());
    expect(bytes.length).toBe(body.length);
    expect(bytes.equals(body)).toBe(true);
    s3.destroy();
  });

  it('rejects a wrong secret key', async () => {
    const s3 = client('wrong-secret-key-0000000000000000000000');
    const err = await s3.send(new ListBucketsCommand({})).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(S3ServiceException);
    expect((err as S3ServiceException).$metadata.httpStatusCode).toBe(403);
    s3.destroy();
  });
});

describe('registry (distribution)', () => {
  const sha256 = (b: Uint8Array): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

  async function pushBlob(repo: string, data: Uint8Array): Promise<string> {
    const digest = sha256(data);
    const start = await fetch(`${cluster.registry.url}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
    expect(start.status).toBe(202);
    const location = start.headers.get('location');
    expect(location).toBeTruthy();
    const url = new URL(location ?? '', cluster.registry.url);
    url.searchParams.set('digest', digest);
    const put = await fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: data,
    });
    expect(put.status).toBe(201);
    expect(put.headers.get('docker-content-digest')).toBe(digest);
    return digest;
  }

  it('accepts a blob and an image manifest, then lists the tag', async () => {
    const repo = `smoke/img-${randomBytes(3).toString('hex')}`;
    const config = Buffer.from(
      JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers' } }),
    );
    const layer = randomBytes(4096);
    const configDigest = await pushBlob(repo, config);
    const layerDigest = await pushBlob(repo, layer);

    const head = await fetch(`${cluster.registry.url}/v2/${repo}/blobs/${layerDigest}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(layer.length);

    const manifestType = 'application/vnd.oci.image.manifest.v1+json';
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: manifestType,
        config: {
          mediaType: 'application/vnd.oci.image.config.v1+json',
          digest: configDigest,
          size: config.length,
        },
        layers: [
          {
            mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
            digest: layerDigest,
            size: layer.length,
          },
        ],
      }),
    );
    const put = await fetch(`${cluster.registry.url}/v2/${repo}/manifests/abc123`, {
      method: 'PUT',
      headers: { 'content-type': manifestType },
      body: manifest,
    });
    expect(put.status).toBe(201);
    expect(put.headers.get('docker-content-digest')).toBe(sha256(manifest));

    const tags = await fetch(`${cluster.registry.url}/v2/${repo}/tags/list`);
    expect(tags.status).toBe(200);
    expect(await tags.json()).toEqual({ name: repo, tags: ['abc123'] });

    const back = await fetch(`${cluster.registry.url}/v2/${repo}/manifests/abc123`, {
      headers: { accept: manifestType },
    });
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(manifest)).toBe(true);
  });

  it('refuses a manifest whose blobs were never pushed', async () => {
    const repo = `smoke/missing-${randomBytes(3).toString('hex')}`;
    const ghost = sha256(randomBytes(32));
    const res = await fetch(`${cluster.registry.url}/v2/${repo}/manifests/v1`, {
      method: 'PUT',
      headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' },
      body: JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: ghost, size: 32 },
        layers: [],
      }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: Array<{ code: string }> };
    expect(body.errors.map((e) => e.code)).toContain('MANIFEST_BLOB_UNKNOWN');
  });
});
