/**
 * The kubelet, Deployment and EndpointSlice controllers as the canary tests play them for function
 * `c`: each Deployment with replicas gets one Pod object (its template's labels and revision
 * annotation) and one local HTTP server playing that pod, which answers its template's VERSION
 * variable and 500 to every FAIL_EVERY-th request, each DELAY_MS late when set; the Service's
 * EndpointSlice lists every such pod ready.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { apply, deleteObject, type KubeObject, listObjects } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, ENDPOINT_SLICE, POD } from '../../src/platform/kube/resource-types.js';
import type { KubeEnv } from './harness.js';

interface FakePod {
  name: string;
  address: string;
  server: Server;
  port: number;
}

/** Plays the kubelet and the EndpointSlice controller for the namespace's Deployments. */
export class PlayedPods {
  readonly pods = new Map<string, FakePod>();
  private readonly byAddress = new Map<string, FakePod>();
  private next = 1;
  private stopped = false;
  private lastSlice = '';
  private readonly loop: Promise<void>;

  constructor(private readonly env: KubeEnv) {
    this.loop = (async () => {
      while (!this.stopped) {
        await this.sync().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
  }

  originOf(address: string): string {
    const pod = this.byAddress.get(address);
    // An address no pod plays: a port nothing listens on, so such a request fails loudly.
    return `http://127.0.0.1:${pod?.port ?? 1}`;
  }

  private async sync(): Promise<void> {
    const { http, ns } = this.env;
    const deployments = await listObjects<KubeObject>(http, DEPLOYMENT, { namespace: ns });
    const wanted = new Map<string, KubeObject>();
    for (const d of deployments.items) {
      const spec = d.spec as {
        replicas?: number;
        template: { metadata: { annotations: Record<string, string> } };
      };
      if ((spec.replicas ?? 1) === 0 || d.metadata.deletionTimestamp) continue;
      const revision = spec.template.metadata.annotations['sless.dev/revision'] ?? '';
      const hash = createHash('sha256').update(revision).digest('hex').slice(0, 8);
      wanted.set(`${d.metadata.name}-${hash}`, d);
    }
    for (const [name, d] of wanted) if (!this.pods.has(name)) await this.startPod(name, d);
    for (const [name, pod] of this.pods)
      if (!wanted.has(name)) {
        this.pods.delete(name);
        this.byAddress.delete(pod.address);
        await deleteObject(http, POD, ns, name);
        pod.server.close();
      }
    const listed = [...this.pods.values()].sort((a, b) => a.name.localeCompare(b.name));
    const slice = JSON.stringify(listed.map((p) => [p.name, p.address]));
    if (slice === this.lastSlice) return;
    await apply(http, ENDPOINT_SLICE, {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'c-abcde',
        namespace: ns,
        labels: {
          'sless.dev/function': 'c',
          'app.kubernetes.io/managed-by': 'sless',
          'kubernetes.io/service-name': 'c',
        },
      },
      addressType: 'IPv4',
      endpoints: listed.map((p) => ({
        addresses: [p.address],
        conditions: { ready: true },
        targetRef: { kind: 'Pod', namespace: ns, name: p.name },
      })),
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    this.lastSlice = slice;
  }

  private async startPod(name: string, deployment: KubeObject): Promise<void> {
    const template = (
      deployment.spec as {
        template: {
          metadata: { labels: Record<string, string>; annotations: Record<string, string> };
          spec: { containers: { env?: { name: string; value?: string }[] }[] };
        };
      }
    ).template;
    const env = new Map((template.spec.containers[0]?.env ?? []).map((e) => [e.name, e.value ?? '']));
    const version = env.get('VERSION') ?? '?';
    const failEvery = Number(env.get('FAIL_EVERY') ?? 0);
    const delayMs = Number(env.get('DELAY_MS') ?? 0);
    let served = 0;
    const server = createServer((req, res) => {
      req.resume();
      served++;
      const failed = failEvery > 0 && served % failEvery === 0;
      const answer = () => {
        if (failed) {
          res.statusCode = 500;
          res.end('boom');
        } else res.end(version);
      };
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const pod: FakePod = {
      name,
      address: `10.3.0.${this.next++}`,
      server,
      port: (server.address() as AddressInfo).port,
    };
    await this.env.http.request('POST', `/api/v1/namespaces/${this.env.ns}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, labels: template.metadata.labels, annotations: template.metadata.annotations },
        spec: { containers: [{ name: 'function', image: 'function:test' }] },
      },
    });
    this.pods.set(name, pod);
    this.byAddress.set(pod.address, pod);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    for (const pod of this.pods.values()) pod.server.close();
  }
}
