/** Tenant namespaces for the API's ensure endpoint: created idempotently, never deleted. */
import type { NamespaceRegistry } from '../../core/interfaces.js';
import { isStatus, type KubeHttp } from './http.js';
import { getObject } from './objects.js';
import { collectionPath, NAMESPACE } from './resource-types.js';

export class KubeNamespaces implements NamespaceRegistry {
  private readonly http: KubeHttp;
  constructor(options: { http: KubeHttp }) {
    this.http = options.http;
  }

  async namespaceExists(namespace: string): Promise<boolean> {
    return (await getObject(this.http, NAMESPACE, undefined, namespace)) !== undefined;
  }

  /** Create, and let the API server decide the race: exactly one concurrent caller gets 201. */
  async ensureNamespace(namespace: string): Promise<boolean> {
    try {
      await this.http.request('POST', collectionPath(NAMESPACE), {
        body: {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: {
            name: namespace,
            labels: { 'app.kubernetes.io/managed-by': 'sless', 'sless.dev/tenant': 'true' },
          },
        },
        query: { fieldManager: 'sless-controller' },
      });
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }
}
