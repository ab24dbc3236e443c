/**
 * What a namespace that runs functions gets besides the Namespace itself: a copy of the pull-only
 * registry secret (so its pods can pull images, while push credentials stay with the builds in the
 * controller's namespace), and a NetworkPolicy that admits only the controller (which is also the
 * `/fn/` proxy) and the namespace's own cron Trigger pods. Both are pure, deterministic manifests,
 * applied server-side as `sless-controller`, so re-applying is a no-op and a rotated source secret
 * propagates on the next apply.
 */
import { type ErrorCategory, RolloutError } from '../../core/errors.js';
import type { KubeHttp } from './http.js';
import { FUNCTION_PORT, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { apply, getObject, type KubeObject } from './objects.js';
import { type ResourceType, SECRET } from './resource-types.js';

export const NETWORK_POLICY: ResourceType = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  plural: 'networkpolicies',
  namespaced: true,
};

export const FUNCTIONS_POLICY_NAME = 'sless-functions';
export const DOCKER_CONFIG_JSON = 'kubernetes.io/dockerconfigjson';
export const DOCKER_CONFIG_JSON_KEY = '.dockerconfigjson';
/** Where a copy came from (`namespace/name`), for whoever wonders who wrote it. */
export const ANNOTATION_PULL_SECRET_SOURCE = 'sless.dev/pull-secret-source';

/** The labels of the controller's pods (deploy/controller.yaml); the controller is also the proxy. */
export const CONTROLLER_POD_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'sless-controller',
});

/** Function pods (workload-manifests.ts `functionLabels`): the only pods the policy selects. */
export const FUNCTION_POD_SELECTOR: Readonly<Record<string, string>> = Object.freeze({
  [LABEL_COMPONENT]: 'function',
  [LABEL_MANAGED_BY]: MANAGED_BY,
});

/** Cron Trigger pods (cron-scheduler.ts): they POST to the function's Service from its own namespace. */
export const TRIGGER_POD_SELECTOR: Readonly<Record<string, string>> = Object.freeze({
  [LABEL_COMPONENT]: 'trigger',
  [LABEL_MANAGED_BY]: MANAGED_BY,
});

export interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

/** The copy: same `.dockerconfigjson` bytes (base64, as read), type dockerconfigjson, labelled sless. */
export function pullSecretCopy(
  namespace: string,
  name: string,
  dockerConfigJson: string,
  source: string,
): SecretObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY },
      annotations: { [ANNOTATION_PULL_SECRET_SOURCE]: source },
    },
    type: DOCKER_CONFIG_JSON,
    data: { [DOCKER_CONFIG_JSON_KEY]: dockerConfigJson },
  };
}

/**
 * Ingress to function pods on the function port, only from the controller's pods in the controller
 * namespace and from the namespace's own cron Trigger pods. Egress is not restricted.
 */
export function functionsNetworkPolicy(namespace: string, controllerNamespace: string): KubeObject {
  const port = [{ protocol: 'TCP', port: FUNCTION_PORT }];
  return {
    apiVersion: NETWORK_POLICY.apiVersion,
    kind: NETWORK_POLICY.kind,
    metadata: {
      name: FUNCTIONS_POLICY_NAME,
      namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY },
    },
    spec: {
      podSelector: { matchLabels: { ...FUNCTION_POD_SELECTOR } },
      policyTypes: ['Ingress'],
      ingress: [
        {
          from: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': controllerNamespace } },
              podSelector: { matchLabels: { ...CONTROLLER_POD_LABELS } },
            },
          ],
          ports: port,
        },
        { from: [{ podSelector: { matchLabels: { ...TRIGGER_POD_SELECTOR } } }], ports: port },
      ],
    },
  };
}

/**
 * The pull secret cannot be copied. For a deploy it is a failed rollout (pods would sit in
 * ImagePullBackOff): the old revision keeps serving and the rollout is retried, so it succeeds once
 * an operator creates the secret. For the API's ensure it is 503: the caller asked nothing wrong,
 * the controller is missing a piece of its own configuration.
 */
export class PullSecretError extends RolloutError {
  override readonly category: ErrorCategory = 'Unavailable';
}

/**
 * Copies the pull-only registry secret from the controller namespace into a function namespace. The
 * source is read by name each time (RBAC `get`), so a rotated source reaches the copies on their next
 * ensure or deploy. A missing or malformed source fails loudly: pods would sit in ImagePullBackOff.
 */
export class PullSecretSync {
  private readonly http: KubeHttp;
  private readonly controllerNamespace: string;
  readonly source: string;
  readonly name: string;

  constructor(options: { http: KubeHttp; controllerNamespace: string; source: string; name: string }) {
    this.http = options.http;
    this.controllerNamespace = options.controllerNamespace;
    this.source = options.source;
    this.name = options.name;
  }

  async ensure(namespace: string): Promise<void> {
    // The source itself: nothing to copy.
    if (namespace === this.controllerNamespace && this.name === this.source) return;
    const where = `${this.controllerNamespace}/${this.source}`;
    const source = await getObject<SecretObject>(this.http, SECRET, this.controllerNamespace, this.source);
    if (!source)
      throw new PullSecretError(
        `pull secret ${where} does not exist: create it with pull-only registry credentials (SLESS_PULL_SECRET), or set SLESS_IMAGE_PULL_SECRETS="" for a registry that allows anonymous pulls`,
      );
    const data = source.data?.[DOCKER_CONFIG_JSON_KEY];
    if (source.type !== DOCKER_CONFIG_JSON || !data)
      throw new PullSecretError(
        `pull secret ${where} is not a ${DOCKER_CONFIG_JSON} Secret with ${DOCKER_CONFIG_JSON_KEY}`,
      );
    await apply(this.http, SECRET, pullSecretCopy(namespace, this.name, data, where));
  }
}
