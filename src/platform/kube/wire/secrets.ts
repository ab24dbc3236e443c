/**
 * Secrets on kube, wired: the functions' Secrets (read to check and hash references, never copied),
 * SOPS files of a repository decrypted with the age key the operator keeps in the controller
 * namespace and written as Secrets, and the leader's watch that rolls the functions referencing a
 * Secret that changed.
 */
import type { Logger } from 'pino';
import type { KubeControllerConfig } from '../../../config/kube.js';
import type { ObjectStore } from '../../../core/interfaces.js';
import type { LeaderTasks } from '../../../core/leadership.js';
import type { ReconcileRequests } from '../../../core/reconcile-requests.js';
import { SopsDecryptor } from '../../../manifest/sops.js';
import { requeueReferencing } from '../../../secrets/references.js';
import { RepoSecrets } from '../../../secrets/repo-secrets.js';
import type { KubeHttp } from '../http.js';
import { KubeSecrets, kubeAgeKey } from '../secrets.js';

export interface KubeSecretsWiring {
  secrets: KubeSecrets;
  repoSecrets: RepoSecrets;
}

export function wireKubeSecrets(deps: {
  http: KubeHttp;
  config: KubeControllerConfig;
  logger: Logger;
  store: ObjectStore;
  requests: ReconcileRequests;
  leaderTasks: Pick<LeaderTasks, 'register'>;
}): KubeSecretsWiring {
  const { http, config, logger, store, requests } = deps;
  const namespaces = config.watchNamespaces ? { namespaces: config.watchNamespaces } : {};
  const secrets = new KubeSecrets({ http, logger, ...namespaces });
  const ageKey = kubeAgeKey(http, config.controllerNamespace, config.sopsAgeSecret);
  const repoSecrets = new RepoSecrets({
    decryptor: new SopsDecryptor({ binary: config.sopsBinary, key: { text: ageKey.text } }),
    sink: secrets,
    keyVersion: ageKey.version,
  });
  // A Secret that changes queues the Functions that reference it: a rotation rolls their pods.
  deps.leaderTasks.register('secret watch', () => {
    const watcher = new KubeSecrets({ http, logger, ...namespaces });
    watcher.watch((ns, name) => void requeueReferencing(store, requests, ns, name));
    return () => watcher.stop();
  });
  return { secrets, repoSecrets };
}
