/**
 * Kubernetes Secrets as functions use them. The controller reads a referenced Secret to check its
 * keys and to hash its values (keyed with the Secret's uid) for the pod template; it never writes a
 * value into a Deployment, a status or an Event. It watches Secrets' metadata only (no values cross
 * the watch) to queue the functions that reference one that changed. SOPS files in git become
 * Secrets of the source's namespace, labelled with the source, and are pruned with it.
 */

import type { Logger } from 'pino';
import { asError, SlessError } from '../../core/errors.js';
import { objectKey, splitObjectKey } from '../../core/object-key.js';
import type { SecretReader, SecretValues } from '../../secrets/references.js';
import type { DecryptedSecret, SecretSink } from '../../secrets/repo-secrets.js';
import type { KubeHttp } from './http.js';
import { LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { apply, deleteObject, getObject, type KubeObject, listObjects } from './objects.js';
import { collectionPath, SECRET } from './resource-types.js';
import { watchCollection } from './watch.js';

/** The GitSource whose SOPS file made a Secret (a label: the source lives in the same namespace). */
export const LABEL_SOPS_SOURCE = 'sless.dev/sops-source';

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
  type?: string;
}

/** Metadata only: a watch of Secrets never carries their values to the controller. */
const METADATA_ONLY = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_ONLY_WATCH = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export class KubeSecrets implements SecretReader, SecretSink {
  private readonly aborts = new Set<AbortController>();
  private stopped = false;

  constructor(
    private readonly options: {
      http: KubeHttp;
      logger: Logger;
      /** Namespaces to watch; all when absent. */
      namespaces?: readonly string[];
      retryMs?: number;
    },
  ) {}

  async get(namespace: string, name: string): Promise<SecretValues | undefined> {
    const secret = await getObject<SecretObject>(this.options.http, SECRET, namespace, name);
    if (!secret) return undefined;
    const data: Record<string, Uint8Array> = {};
    for (const [key, value] of Object.entries(secret.data ?? {})) data[key] = Buffer.from(value, 'base64');
    return { data, hashKey: secret.metadata.uid ?? objectKey(namespace, name) };
  }

  /** Calls back with every Secret that is added, changed or deleted, until stop(). */
  watch(onChange: (namespace: string, name: string) => void): void {
    for (const namespace of this.options.namespaces ?? [undefined]) void this.run(namespace, onChange);
  }

  stop(): void {
    this.stopped = true;
    for (const abort of this.aborts) abort.abort();
  }

  private async run(
    namespace: string | undefined,
    onChange: (namespace: string, name: string) => void,
  ): Promise<void> {
    const seen = new Map<string, string>();
    while (!this.stopped) {
      try {
        const list = await this.options.http.request<{
          metadata?: { resourceVersion?: string };
          items?: KubeObject[];
        }>('GET', collectionPath(SECRET, namespace), { accept: METADATA_ONLY, query: { limit: 5000 } });
        const present = new Set<string>();
        for (const item of list.items ?? []) {
          const key = objectKey(item.metadata.namespace ?? '', item.metadata.name);
          present.add(key);
          const before = seen.get(key);
          seen.set(key, item.metadata.resourceVersion ?? '');
          // Changed while the watch was down (none at the first list: nothing was seen yet).
          if (before !== undefined && before !== item.metadata.resourceVersion)
            onChange(item.metadata.namespace ?? '', item.metadata.name);
        }
        for (const key of [...seen.keys()])
          if (!present.has(key)) {
            seen.delete(key);
            const { namespace: ns, name } = splitObjectKey(key);
            onChange(ns, name);
          }
        const abort = new AbortController();
        this.aborts.add(abort);
        if (this.stopped) abort.abort();
        try {
          await watchCollection(
            this.options.http,
            collectionPath(SECRET, namespace),
            { resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: false },
            (phase, object) => {
              if (phase === 'ERROR' || phase === 'BOOKMARK') return;
              const key = objectKey(object.metadata.namespace ?? '', object.metadata.name);
              if (phase === 'DELETED') seen.delete(key);
              else seen.set(key, object.metadata.resourceVersion ?? '');
              onChange(object.metadata.namespace ?? '', object.metadata.name);
            },
            abort.signal,
            METADATA_ONLY_WATCH,
          );
        } finally {
          this.aborts.delete(abort);
        }
      } catch (thrown) {
        if (this.stopped) return;
        this.options.logger.warn(
          { watch: 'secrets', err: asError(thrown).message },
          'secret watch failed; re-listing',
        );
        await new Promise((r) => setTimeout(r, this.options.retryMs ?? 1000));
      }
    }
  }

  /** SecretSink: the Secrets a source's SOPS files make become exactly these, in its own namespace. */
  async reconcile(namespace: string, managedBy: string, secrets: readonly DecryptedSecret[]): Promise<void> {
    const source = managedBy.slice(managedBy.indexOf('/') + 1);
    const labels = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_SOPS_SOURCE]: source };
    for (const secret of secrets) {
      if (secret.namespace !== namespace)
        throw new Error(`secret ${secret.name} is not of namespace ${namespace}`);
      const existing = await getObject<SecretObject>(this.options.http, SECRET, namespace, secret.name);
      if (existing && existing.metadata.labels?.[LABEL_SOPS_SOURCE] !== source)
        throw new SlessError(
          `Secret "${secret.name}" exists in ${namespace} and was not made from this source's SOPS files`,
          { reason: 'OwnershipConflict', category: 'Conflict' },
        );
    }
    for (const secret of secrets) {
      const data: Record<string, string> = {};
      for (const key of Object.keys(secret.data).sort())
        data[key] = (secret.data[key] as Buffer).toString('base64');
      await apply(
        this.options.http,
        SECRET,
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: {
            name: secret.name,
            namespace,
            labels,
            annotations: { 'sless.dev/sops-file': secret.file },
          },
          type: 'Opaque',
          data,
        } as SecretObject,
        { force: true },
      );
    }
    const wanted = new Set(secrets.map((s) => s.name));
    const owned = await listObjects<KubeObject>(this.options.http, SECRET, { namespace, labels });
    for (const object of owned.items)
      if (!wanted.has(object.metadata.name))
        await deleteObject(this.options.http, SECRET, namespace, object.metadata.name);
  }
}

/**
 * The operator's age key, from a Secret in the controller namespace: its first key ending in
 * `.agekey` (as Flux's `sops-age` Secret), read each time a file is decrypted, so a new key needs no
 * restart. `version` is its resourceVersion, so files that failed are tried again with a new key.
 */
export function kubeAgeKey(http: KubeHttp, namespace: string, name: string) {
  const read = async (): Promise<{ text: string; version: string } | undefined> => {
    const secret = await getObject<SecretObject>(http, SECRET, namespace, name);
    const key = Object.keys(secret?.data ?? {})
      .sort()
      .find((k) => k.endsWith('.agekey'));
    if (!secret || !key) return undefined;
    return {
      text: Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8'),
      version: secret.metadata.resourceVersion ?? '',
    };
  };
  return {
    text: async () => {
      const key = await read();
      if (!key)
        throw new Error(`no age key: create Secret ${name} in ${namespace} with a key ending in .agekey`);
      return key.text;
    },
    version: async () => (await read())?.version ?? 'none',
  };
}
