/**
 * A free loopback port for a caller that must name one before anything binds it: the tests and
 * benchmarks that start sless or a runtime on a TCP port.
 */
import { createServer } from 'node:net';

/** Asks the kernel for a free loopback port. The caller binds it right after; a lost race is retried. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
