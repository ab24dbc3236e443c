/**
 * Secrets kept in git the way Flux users keep them: a Kubernetes `Secret` manifest encrypted with
 * SOPS and age. A sync decrypts every SOPS file below the source's path with the operator's key;
 * a file that does not decrypt, or holds anything but a Secret of the source's own namespace, is an
 * issue like any bad manifest (`file#0 field: reason`) and nothing of that commit is applied. The
 * decrypted values go to the platform's secrets (the local store, or a Secret in the namespace on
 * kube), labelled with the source that made them, and are pruned when the file leaves the repo.
 */

import { createHash } from 'node:crypto';
import { BoundedCache } from '../core/bounded-cache.js';
import type { ManifestIssue } from '../core/errors.js';
import type { SourceSnapshot } from '../core/interfaces.js';
import { DNS_LABEL_PATTERN } from '../core/naming.js';
import { objectKey } from '../core/object-key.js';
import { normalizeRepoPath } from '../core/paths.js';
import type { GitSource } from '../core/resources.js';
import { isSopsYaml, type SopsDecryptor, SopsError } from '../manifest/sops.js';
import { checkSecretData, SecretInputError } from './local-store.js';

const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
const YAML_FILE = /\.ya?ml$/i;
const SKIPPED_DIRS = /(^|\/)(node_modules|\.git)\//;
const MAX_FILE_BYTES = 1024 * 1024;

export interface DecryptedSecret {
  file: string;
  namespace: string;
  name: string;
  data: Record<string, Buffer>;
}

export interface RepoSecretsLoad {
  secrets: DecryptedSecret[];
  /** The SOPS files: left out of build keys, as manifests are. */
  files: string[];
  issues: ManifestIssue[];
}

/** Where decrypted secrets go; `managedBy` is `namespace/source`. */
export interface SecretSink {
  /** Makes exactly these the secrets `managedBy` manages in `namespace`: sets them, prunes the rest. */
  reconcile(namespace: string, managedBy: string, secrets: readonly DecryptedSecret[]): Promise<void>;
}

type Outcome = { ok: true; doc: unknown } | { ok: false; reason: string };

export class RepoSecrets {
  /** By blob id and key: a commit that changes nothing in a SOPS file does not run sops again. */
  private readonly decrypted = new BoundedCache<string, Outcome>(1000);
  private readonly notSops = new BoundedCache<string, boolean>(20_000);

  constructor(
    private readonly options: {
      decryptor: SopsDecryptor;
      sink: SecretSink;
      /** Changes when the operator's key does, so a new key is tried on files that failed. */
      keyVersion?: () => Promise<string>;
    },
  ) {}

  /** The SOPS files of the source at this commit, with their text; nothing is decrypted here. */
  private async *sopsFilesOf(
    snapshot: SourceSnapshot,
    source: GitSource,
  ): AsyncGenerator<{ file: { path: string; oid: string }; text: string }> {
    const root = normalizeRepoPath(source.spec.path ?? '.');
    if (root === undefined) return;
    const files = (await snapshot.listFiles(root)).filter(
      (f) => YAML_FILE.test(f.path) && !SKIPPED_DIRS.test(f.path) && f.mode !== '120000',
    );
    for (const file of files) {
      const size = await snapshot.fileSize?.(file);
      if (size !== undefined && size > MAX_FILE_BYTES) continue;
      // Most YAML is not SOPS: a blob once found not to be is not read again on the next sync.
      if (this.notSops.get(file.oid)) continue;
      const text = Buffer.from(await snapshot.readFile(file.path, file.oid)).toString('utf8');
      if (!isSopsYaml(text)) {
        this.notSops.set(file.oid, true);
        continue;
      }
      yield { file, text };
    }
  }

  /**
   * The SOPS files of the source at this commit, found without decrypting them: what a build leaves
   * out when the sync that planned it is not in memory any more (a restart).
   */
  async sopsFiles(snapshot: SourceSnapshot, source: GitSource): Promise<string[]> {
    const found: string[] = [];
    for await (const { file } of this.sopsFilesOf(snapshot, source)) found.push(file.path);
    return found;
  }

  async load(snapshot: SourceSnapshot, source: GitSource): Promise<RepoSecretsLoad> {
    const result: RepoSecretsLoad = { secrets: [], files: [], issues: [] };
    const keyVersion = (await this.options.keyVersion?.()) ?? '';
    const names = new Map<string, string>();
    for await (const { file, text } of this.sopsFilesOf(snapshot, source)) {
      result.files.push(file.path);
      const add = (field: string, reason: string) =>
        result.issues.push({ file: file.path, index: 0, field, reason });
      const cacheKey = `${file.oid}\0${keyVersion}`;
      let outcome = this.decrypted.get(cacheKey);
      if (!outcome) {
        try {
          outcome = { ok: true, doc: await this.options.decryptor.decrypt(text) };
        } catch (error) {
          if (!(error instanceof SopsError)) throw error;
          outcome = { ok: false, reason: `cannot decrypt this SOPS file: ${error.message}` };
        }
        this.decrypted.set(cacheKey, outcome);
      }
      if (!outcome.ok) {
        add('', outcome.reason);
        continue;
      }
      const secret = secretOf(outcome.doc, source.metadata.namespace, add);
      if (!secret) continue;
      const first = names.get(secret.name);
      if (first) {
        add('metadata.name', `duplicate Secret "${secret.name}" (first defined in ${first})`);
        continue;
      }
      names.set(secret.name, file.path);
      result.secrets.push({ ...secret, file: file.path });
    }
    return result;
  }

  /** After the commit's manifests passed: the source's secrets become exactly these. */
  apply(source: GitSource, secrets: readonly DecryptedSecret[]): Promise<void> {
    const { namespace, name } = source.metadata;
    return this.options.sink.reconcile(namespace, objectKey(namespace, name), secrets);
  }

  /** The source is gone: so are the secrets it made. */
  prune(namespace: string, sourceName: string): Promise<void> {
    return this.options.sink.reconcile(namespace, objectKey(namespace, sourceName), []);
  }
}

/** A decrypted document as a Secret of the source's namespace, or undefined after adding its issues. */
function secretOf(
  doc: unknown,
  namespace: string,
  add: (field: string, reason: string) => void,
): Omit<DecryptedSecret, 'file'> | undefined {
  const record = (doc ?? {}) as Record<string, unknown>;
  if (record.apiVersion !== 'v1' || record.kind !== 'Secret') {
    add('kind', 'a SOPS file under the source path must hold one v1 Secret');
    return undefined;
  }
  const metadata = (record.metadata ?? {}) as Record<string, unknown>;
  const name = metadata.name;
  if (typeof name !== 'string' || !DNS_LABEL.test(name) || name.length > 63) {
    add('metadata.name', 'must be a DNS-1123 label (lowercase letters, digits and "-")');
    return undefined;
  }
  if (metadata.namespace !== undefined && metadata.namespace !== namespace) {
    add('metadata.namespace', `must be omitted or "${namespace}" (the source's namespace)`);
    return undefined;
  }
  if (record.type !== undefined && record.type !== 'Opaque') {
    add('type', 'must be Opaque (or omitted)');
    return undefined;
  }
  const data: Record<string, Buffer> = {};
  for (const [field, encoding] of [
    ['data', 'base64'],
    ['stringData', 'utf8'],
  ] as const) {
    const values = record[field];
    if (values === undefined) continue;
    if (values === null || typeof values !== 'object' || Array.isArray(values)) {
      add(field, 'must be a map of strings');
      return undefined;
    }
    for (const [key, value] of Object.entries(values as Record<string, unknown>)) {
      // Never the value in a message: only its key.
      if (typeof value !== 'string') {
        add(`${field}.${key}`, 'must be a string');
        return undefined;
      }
      if (encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(value.replace(/\s+/g, ''))) {
        add(`${field}.${key}`, 'must be base64');
        return undefined;
      }
      data[key] = Buffer.from(value, encoding);
    }
  }
  try {
    checkSecretData(data);
  } catch (error) {
    if (!(error instanceof SecretInputError)) throw error;
    add('data', error.message);
    return undefined;
  }
  return { namespace, name, data };
}

/** A key file's version: its content's hash (never the key). */
export function keyVersionOf(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
