/**
 * Secrets on the local platform, wired around the sealed store: SOPS files of a repository decrypted
 * with the operator's age key file and kept in the store, and a change of a secret (set, rotated,
 * deleted) queueing the Functions that reference it and the amqp Triggers whose URL it holds.
 */

import { readFile } from 'node:fs/promises';
import type { LocalConfig } from '../../../config/config.js';
import type { ObjectStore } from '../../../core/interfaces.js';
import type { ReconcileRequests } from '../../../core/reconcile-requests.js';
import { SopsDecryptor } from '../../../manifest/sops.js';
import type { LocalSecretStore } from '../../../secrets/local-store.js';
import { requeueReferencing } from '../../../secrets/references.js';
import { keyVersionOf, RepoSecrets } from '../../../secrets/repo-secrets.js';

/** A key file's version, from its content: a new key is tried on files that failed with the old. */
async function fileVersion(path: string): Promise<string> {
  try {
    return keyVersionOf(await readFile(path, 'utf8'));
  } catch {
    return 'unreadable';
  }
}

export function wireLocalSecrets(deps: {
  config: Pick<LocalConfig, 'sopsBinary' | 'sopsAgeKeyFile'>;
  secrets: LocalSecretStore;
  store: ObjectStore;
  requests: ReconcileRequests;
}): { repoSecrets: RepoSecrets } {
  const { config, secrets, store, requests } = deps;
  const keyFile = config.sopsAgeKeyFile;
  const repoSecrets = new RepoSecrets({
    decryptor: new SopsDecryptor({ binary: config.sopsBinary, key: keyFile ? { file: keyFile } : undefined }),
    sink: secrets,
    ...(keyFile ? { keyVersion: () => fileVersion(keyFile) } : {}),
  });
  secrets.subscribe((namespace, name) => void requeueReferencing(store, requests, namespace, name));
  secrets.subscribe(
    (namespace, name) =>
      void store.list('Trigger', { namespace }).then((triggers) => {
        for (const t of triggers)
          if (t.spec.secretRef?.name === name) requests.request('Trigger', namespace, t.metadata.name);
      }),
  );
  return { repoSecrets };
}
