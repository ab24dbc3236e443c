/**
 * Webhook secrets on Kubernetes: a GitSource's secretRef Secret may carry `webhookSecret`, so each
 * tenant signs its own hooks without the controller's env changing. Without one, the controller's
 * SLESS_WEBHOOK_SECRET_<NS>__<SOURCE> applies, as in local mode: always one namespace's one source.
 */
import { type WebhookSecretSettings, webhookSecretFor } from '../../config/auth.js';
import type { ObjectStore } from '../../core/interfaces.js';
import type { KubeHttp } from './http.js';
import { getObject, type KubeObject } from './objects.js';
import { SECRET } from './resource-types.js';

export const WEBHOOK_SECRET_KEY = 'webhookSecret';

export function kubeWebhookSecrets(options: {
  http: KubeHttp;
  store: ObjectStore;
  fallback: WebhookSecretSettings;
}): (namespace: string, source: string) => Promise<string | undefined> {
  return async (namespace, sourceName) => {
    const source = await options.store.get('GitSource', namespace, sourceName);
    const secretName = source?.spec.secretRef?.name;
    if (secretName) {
      const secret = await getObject<KubeObject & { data?: Record<string, string> }>(
        options.http,
        SECRET,
        namespace,
        secretName,
      );
      const value = secret?.data?.[WEBHOOK_SECRET_KEY];
      if (value !== undefined) return Buffer.from(value, 'base64').toString('utf8');
    }
    return webhookSecretFor(options.fallback, namespace, sourceName);
  };
}
