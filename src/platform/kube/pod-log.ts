/** A container's log through the API server (which asks the pod's kubelet). */
import type { KubeHttp } from './http.js';
import { objectPath, POD } from './resource-types.js';

export function readPodLog(
  http: KubeHttp,
  namespace: string,
  pod: string,
  container: string,
  tailLines: number,
): Promise<string> {
  return http.raw('GET', objectPath(POD, namespace, pod, 'log'), {
    query: { container, tailLines },
    // The log is text/plain, yet asking for text/plain alone gets a 406: the API server negotiates
    // its error and Status types first (seen on v1.37). Any type is what kubectl asks for too.
    accept: '*/*',
  });
}
