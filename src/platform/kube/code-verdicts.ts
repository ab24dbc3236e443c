/**
 * The code security gate's verdicts on kube: one ConfigMap per build key in the controller's
 * namespace, where tenants cannot write (a verdict on a Function they can edit could be forged).
 * A verdict never changes, so the first one stored for a key stands.
 */
import {
  type CodeVerdictStore,
  decodeStoredVerdict,
  type StoredCodeVerdict,
} from '../../core/code-verdicts.js';
import { isStatus, type KubeHttp } from './http.js';
import { LABEL_BUILD_KEY, LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { getObject, type KubeObject } from './objects.js';
import { CONFIG_MAP, collectionPath } from './resource-types.js';

export function verdictConfigMapName(buildKey: string): string {
  return `code-verdict-${buildKey}`;
}

export class KubeCodeVerdicts implements CodeVerdictStore {
  private readonly http: KubeHttp;
  private readonly namespace: string;

  constructor(options: { http: KubeHttp; controllerNamespace: string }) {
    this.http = options.http;
    this.namespace = options.controllerNamespace;
  }

  async get(buildKey: string): Promise<StoredCodeVerdict | undefined> {
    const map = await getObject<KubeObject & { data?: Record<string, string> }>(
      this.http,
      CONFIG_MAP,
      this.namespace,
      verdictConfigMapName(buildKey),
    );
    if (!map) return undefined;
    const what = `ConfigMap ${this.namespace}/${map.metadata.name} data.verdict`;
    let value: unknown;
    try {
      value = JSON.parse(map.data?.verdict ?? '');
    } catch {
      throw new Error(`${what} is not JSON`);
    }
    return decodeStoredVerdict(value, what);
  }

  async set(buildKey: string, verdict: StoredCodeVerdict): Promise<void> {
    try {
      await this.http.request('POST', collectionPath(CONFIG_MAP, this.namespace), {
        body: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name: verdictConfigMapName(buildKey),
            namespace: this.namespace,
            labels: {
              [LABEL_MANAGED_BY]: MANAGED_BY,
              [LABEL_COMPONENT]: 'code-verdict',
              [LABEL_BUILD_KEY]: buildKey,
            },
          },
          data: { verdict: JSON.stringify(verdict) },
        },
      });
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
    }
  }
}
