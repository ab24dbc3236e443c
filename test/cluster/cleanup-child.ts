// Child process for cleanup.test.ts: starts a private test cluster, reports its temp dir, then either
// waits to be killed ("wait") or dies by an uncaught error ("throw").
import { dirname } from 'node:path';
import { startTestCluster } from './fixture.ts';

const cluster = await startTestCluster();
process.stdout.write(`READY ${dirname(cluster.kubeconfigPath)}\n`);
if (process.argv[2] === 'throw') throw new Error('cleanup-child: deliberate crash after start');
await new Promise((resolve) => setTimeout(resolve, 600_000));
