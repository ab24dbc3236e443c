// The kube platform's environment for benchmarks, outside vitest: a test cluster of its own
// (test/cluster: kube-apiserver + etcd, S3, registry), the CRDs, a function namespace and a controller
// namespace with the registry secrets and bucket an operator provides (as kubeEnv in
// test/kube/harness.ts does for the tests), and the controller's config for them.
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { type KubeControllerConfig, loadKubeControllerConfig } from '../src/config/kube.js';
import { KubeHttp } from '../src/platform/kube/http.js';
import { apply } from '../src/platform/kube/objects.js';
import { SECRET } from '../src/platform/kube/resource-types.js';
import { startTestCluster, type TestCluster } from '../test/cluster/fixture.ts';
import { createNamespace, installCrds } from '../test/kube/install.ts';

export interface BenchKubeEnv {
  cluster: TestCluster;
  /** An admin client of the cluster (what plays the kubelet uses it, not the controller). */
  http: KubeHttp;
  ns: string;
  controllerNs: string;
  config: KubeControllerConfig;
  close(): Promise<void>;
}

export async function benchKubeEnv(prefix: string): Promise<BenchKubeEnv> {
  const cluster = await startTestCluster();
  const http = new KubeHttp(cluster.kubeConfig);
  try {
    await installCrds(http);
    const id = randomBytes(3).toString('hex');
    const ns = `${prefix}-${id}`;
    const controllerNs = `${prefix}-sys-${id}`;
    await createNamespace(http, ns);
    await createNamespace(http, controllerNs);
    // The pull-only and push credentials an operator provides.
    const registryHost = cluster.registry.url.replace(/^https?:\/\//, '');
    for (const [name, user] of [
      ['sless-registry-pull', 'puller'],
      ['sless-registry-push', 'pusher'],
    ] as const)
      await apply(http, SECRET, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace: controllerNs },
        type: 'kubernetes.io/dockerconfigjson',
        data: {
          '.dockerconfigjson': Buffer.from(
            JSON.stringify({
              auths: { [registryHost]: { auth: Buffer.from(`${user}:${id}`).toString('base64') } },
            }),
          ).toString('base64'),
        },
      });
    const bucket = `${prefix}-${id}`;
    const s3 = new S3Client({
      endpoint: cluster.s3.endpoint,
      region: cluster.s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: cluster.s3.accessKeyId, secretAccessKey: cluster.s3.secretAccessKey },
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
    const config = loadKubeControllerConfig(
      { host: '127.0.0.1', port: '0', namespace: controllerNs, 'watch-namespaces': ns },
      {
        SLESS_REGISTRY: registryHost,
        SLESS_REGISTRY_INSECURE: 'true',
        SLESS_S3_ENDPOINT: cluster.s3.endpoint,
        SLESS_S3_BUCKET: bucket,
        SLESS_S3_REGION: cluster.s3.region,
        AWS_ACCESS_KEY_ID: cluster.s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: cluster.s3.secretAccessKey,
        SLESS_EXTERNAL_URL: 'http://sless.test',
        SLESS_STATE_DIR: join(tmpdir(), `sless-${prefix}-${id}`),
        SLESS_OUTBOUND_ALLOW: '127.0.0.1/32',
        SLESS_LEADER_ELECTION: 'false',
      },
    );
    return {
      cluster,
      http,
      ns,
      controllerNs,
      config,
      close: async () => {
        http.close();
        await cluster.stop();
      },
    };
  } catch (error) {
    http.close();
    await cluster.stop();
    throw error;
  }
}
