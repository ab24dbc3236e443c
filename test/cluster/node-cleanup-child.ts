// Child process for node-cleanup.test.ts: starts a test node, runs a pod behind a Service (so the CNI
// bridge, a veth, a netns, kube-proxy's chains, mounts and pod cgroups all exist), reports READY with
// the node's root, then waits to be SIGKILLed ("wait") or stops the node itself and exits ("stop").
import { KubeHttp } from '../../src/platform/kube/http.js';
import { apply, getObject, type KubeObject } from '../../src/platform/kube/objects.js';
import { POD, SERVICE } from '../../src/platform/kube/resource-types.js';
import { startTestNode } from './node.ts';

const node = await startTestNode();
const http = new KubeHttp(node.kubeConfig);
const labels = { app: 'cleanup-probe' };
await apply(http, POD, {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'cleanup-probe', namespace: 'default', labels },
  spec: { containers: [{ name: 'pause', image: node.images.pause }] },
});
await apply(http, SERVICE, {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'cleanup-probe', namespace: 'default' },
  spec: { selector: labels, ports: [{ port: 80, targetPort: 8080 }] },
});
const deadline = Date.now() + 120_000;
for (;;) {
  const pod = await getObject<KubeObject>(http, POD, 'default', 'cleanup-probe');
  if ((pod?.status as { phase?: string } | undefined)?.phase === 'Running') break;
  if (Date.now() > deadline) throw new Error(`pod not Running: ${JSON.stringify(pod?.status)}`);
  await new Promise((r) => setTimeout(r, 250));
}
http.close();
process.stdout.write(`READY ${node.root}\n`);
if (process.argv[2] === 'stop') {
  await node.stop();
  process.stdout.write('STOPPED\n');
  process.exit(0);
}
await new Promise((resolve) => setTimeout(resolve, 600_000));
