/**
 * Tenant namespaces for the API's ensure endpoint: the Namespace, its copy of the pull secret and the
 * `sless-functions` NetworkPolicy (tenant.ts). Created idempotently, never deleted.
 */
import type { NamespaceRegistry } from '../../core/interfaces.js';
import { SharedNextRun } from '../../core/shared-next-run.js';
import { isStatus, type KubeHttp } from './http.js';
import { apply, getObject } from './objects.js';
import { collectionPath, NAMESPACE } from './resource-types.js';
import { functionsNetworkPolicy, NETWORK_POLICY, type PullSecretSync } from './tenant.js';

export class KubeNamespaces implements NamespaceRegistry {
  private readonly http: KubeHttp;
  private readonly controllerNamespace: string;
  private readonly pullSecrets: PullSecretSync | undefined;
  /** A commit deploys many functions of one namespace at once: they share the next preparation. */
  private readonly preparing = new SharedNextRun<string>();

  /** `pullSecrets` undefined: no pull secret is referenced (a registry that allows anonymous pulls). */
  constructor(options: { http: KubeHttp; controllerNamespace: string; pullSecrets?: PullSecretSync }) {
    this.http = options.http;
    this.controllerNamespace = options.controllerNamespace;
    this.pullSecrets = options.pullSecrets;
  }

  async namespaceExists(namespace: string): Promise<boolean> {
    return (await getObject(this.http, NAMESPACE, undefined, namespace)) !== undefined;
  }

  /**
   * Create the Namespace and let the API server decide the race: exactly one concurrent caller gets
   * true. Every caller then applies the pull secret and the NetworkPolicy (server-side apply, a no-op
   * when unchanged), so an existing namespace is brought up to date too: a rotated pull secret, a
   * namespace created before this code, or a first ensure that failed half way.
   */
  async ensureNamespace(namespace: string): Promise<boolean> {
    const created = await this.createNamespace(namespace);
    await this.prepare(namespace);
    return created;
  }

  /**
   * What a namespace needs before functions run in it: the pull secret (without it the pods end in
   * ImagePullBackOff) and the NetworkPolicy. Deploys call it too, so a namespace nobody ensured is
   * covered as well. Deploys that ask while one preparation runs share the next one, which starts
   * after it: each still sees a preparation begun after it asked.
   */
  prepare(namespace: string): Promise<void> {
    return this.preparing.run(namespace, () => this.prepareNow(namespace));
  }

  private async prepareNow(namespace: string): Promise<void> {
    await this.pullSecrets?.ensure(namespace);
    // Forced: the policy is the tenant boundary, so the controller owns it outright and takes back any
    // field someone else changed instead of leaving an opened policy in place.
    await apply(this.http, NETWORK_POLICY, functionsNetworkPolicy(namespace, this.controllerNamespace), {
      force: true,
    });
  }

  private async createNamespace(namespace: string): Promise<boolean> {
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
