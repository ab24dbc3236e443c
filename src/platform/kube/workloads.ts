/** WorkloadPlatform on Kubernetes: one Deployment and one Service per Function, in its namespace. */
import type { WorkloadPlatform } from '../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import type { KubeHttp } from './http.js';
import { ANNOTATION_REVISION } from './labels.js';
import { apply, deleteObject, getObject, type KubeObject } from './objects.js';
import { DEPLOYMENT, SERVICE } from './resource-types.js';
import { deploymentFor, serviceFor, serviceName } from './workload-manifests.js';

export class KubeWorkloads implements WorkloadPlatform {
  private readonly http: KubeHttp;
  private readonly imagePullSecrets: readonly string[];
  private readonly prepareNamespace: ((namespace: string) => Promise<void>) | undefined;

  /** `prepareNamespace` readies each namespace deployed to: pull secret (lesson 6), NetworkPolicy. */
  constructor(options: {
    http: KubeHttp;
    imagePullSecrets?: readonly string[];
    prepareNamespace?: (namespace: string) => Promise<void>;
  }) {
    this.http = options.http;
    this.imagePullSecrets = options.imagePullSecrets ?? [];
    this.prepareNamespace = options.prepareNamespace;
  }

  /**
   * Applies Service and Deployment. It returns once the API accepted the new revision; the Deployment
   * controller rolls it out (maxUnavailable 0), and the route resolver only routes to available pods.
   */
  async deploy(
    fn: SlessFunction,
    build: BuildRecord,
    options: { revision: string; enabled: boolean },
  ): Promise<void> {
    // Before the Deployment: its pods must be able to pull from the first try.
    await this.prepareNamespace?.(fn.metadata.namespace);
    await apply(this.http, SERVICE, serviceFor(fn));
    await apply(
      this.http,
      DEPLOYMENT,
      deploymentFor(fn, build, { ...options, imagePullSecrets: this.imagePullSecrets }),
    );
  }

  /** Deletes both explicitly; owner references would too, but only where a garbage collector runs. */
  async remove(namespace: string, name: string): Promise<void> {
    await deleteObject(this.http, DEPLOYMENT, namespace, name);
    await deleteObject(this.http, SERVICE, namespace, serviceName(name));
  }

  /** Read from the Deployment itself, the durable record of what was rolled out. */
  async currentRevision(namespace: string, name: string): Promise<string | undefined> {
    const deployment = await getObject<KubeObject>(this.http, DEPLOYMENT, namespace, name);
    return deployment?.metadata.annotations?.[ANNOTATION_REVISION];
  }
}
