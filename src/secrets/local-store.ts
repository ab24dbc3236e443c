/**
 * The local platform's secrets: one file per secret under `{state}/secrets/{ns}/`, each sealed with
 * AES-256-GCM under a key kept in a file of its own elsewhere (`{state}/secret-key/store.key` by
 * default). Files and key are mode 0600 in 0700 directories; a file's name is bound into its seal
 * (the additional data), so a sealed file moved to another name does not open. Values are held in
 * memory to start function processes, and are given to nothing but those processes.
 */

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { SlessError } from '../core/errors.js';
import { DNS_LABEL_PATTERN } from '../core/naming.js';
import { objectKey, splitObjectKey } from '../core/object-key.js';
import { type SecretReader, type SecretValues, valuesHash } from './references.js';
import type { SecretSink } from './repo-secrets.js';

const DNS_LABEL = new RegExp(DNS_LABEL_PATTERN);
export const SECRET_KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;
export const MAX_SECRET_KEYS = 64;
/** As a Kubernetes Secret: 1 MiB in all. */
export const MAX_SECRET_BYTES = 1024 * 1024;

/** What anyone may see of a secret: never a value. */
export interface SecretSummary {
  namespace: string;
  name: string;
  keys: string[];
  /** A keyed hash of the keys and values: it changes when a value does, and tells nothing else. */
  hash: string;
  /** `namespace/source` when a SOPS file in that GitSource's repository made it. */
  managedBy?: string;
  updatedAt: string;
}

export class SecretInputError extends Error {}
/** A secret a GitSource manages may not be changed by hand (the next sync would undo it). */
export class SecretManagedError extends SlessError {
  constructor(message: string) {
    super(message, { reason: 'OwnershipConflict', category: 'Conflict' });
  }
}

interface Entry {
  data: Record<string, Buffer>;
  hashKey: string;
  managedBy?: string;
  updatedAt: string;
}

interface Plain {
  v: 1;
  data: Record<string, string>;
  hashKey: string;
  managedBy?: string;
  updatedAt: string;
}

export type SecretListener = (namespace: string, name: string) => void;

export interface LocalSecretStoreOptions {
  stateDir: string;
  /** Where the store's key lives; apart from the data by default. */
  keyFile?: string;
  logger: Logger;
}

export function checkSecretData(data: Record<string, Uint8Array>): void {
  const keys = Object.keys(data);
  if (keys.length === 0) throw new SecretInputError('a secret needs at least one key');
  if (keys.length > MAX_SECRET_KEYS)
    throw new SecretInputError(`a secret may hold at most ${MAX_SECRET_KEYS} keys`);
  let total = 0;
  for (const key of keys) {
    if (!SECRET_KEY_PATTERN.test(key) || key.length > 253)
      throw new SecretInputError(`key "${key.slice(0, 64)}": must be letters, digits, "-", "_" and "."`);
    total += key.length + (data[key] as Uint8Array).byteLength;
  }
  if (total > MAX_SECRET_BYTES)
    throw new SecretInputError(`a secret may hold at most ${MAX_SECRET_BYTES} bytes`);
}

export class LocalSecretStore implements SecretReader, SecretSink {
  private readonly dir: string;
  private readonly keyFile: string;
  private readonly logger: Logger;
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<SecretListener>();
  private key: Buffer = Buffer.alloc(0);

  constructor(options: LocalSecretStoreOptions) {
    this.dir = join(options.stateDir, 'secrets');
    this.keyFile = options.keyFile ?? join(options.stateDir, 'secret-key', 'store.key');
    this.logger = options.logger;
  }

  /** Reads (or makes) the key, then opens every sealed file. */
  open(): this {
    this.key = this.loadKey();
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    for (const ns of readdirSync(this.dir)) {
      if (!DNS_LABEL.test(ns)) continue;
      for (const file of readdirSync(join(this.dir, ns))) {
        const name = file.replace(/\.sealed$/, '');
        if (file === name || !DNS_LABEL.test(name)) continue;
        try {
          this.entries.set(
            objectKey(ns, name),
            this.unseal(ns, name, readFileSync(join(this.dir, ns, file))),
          );
        } catch (error) {
          // Never the content: only that this file does not open with this key.
          this.logger.warn(
            { secret: `${ns}/${name}`, err: (error as Error).message },
            'a sealed secret does not open with the store key; it is left out',
          );
        }
      }
    }
    return this;
  }

  private loadKey(): Buffer {
    mkdirSync(dirname(this.keyFile), { recursive: true, mode: 0o700 });
    if (!existsSync(this.keyFile)) {
      const fd = openSync(this.keyFile, 'wx', 0o600);
      writeSync(fd, randomBytes(32).toString('hex'));
      fsyncSync(fd);
      closeSync(fd);
    }
    chmodSync(this.keyFile, 0o600);
    const key = Buffer.from(readFileSync(this.keyFile, 'utf8').trim(), 'hex');
    if (key.length !== 32) throw new Error(`${this.keyFile}: not a secret store key (64 hex digits)`);
    return key;
  }

  subscribe(listener: SecretListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async get(namespace: string, name: string): Promise<SecretValues | undefined> {
    return this.getSync(namespace, name);
  }

  getSync(namespace: string, name: string): SecretValues | undefined {
    const entry = this.entries.get(objectKey(namespace, name));
    return entry && { data: entry.data, hashKey: entry.hashKey };
  }

  list(namespace: string): SecretSummary[] {
    const out: SecretSummary[] = [];
    for (const [key, entry] of [...this.entries].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const { namespace: ns, name } = splitObjectKey(key);
      if (ns === namespace) out.push(this.summaryOf(ns, name, entry));
    }
    return out;
  }

  summary(namespace: string, name: string): SecretSummary | undefined {
    const entry = this.entries.get(objectKey(namespace, name));
    return entry && this.summaryOf(namespace, name, entry);
  }

  private summaryOf(namespace: string, name: string, entry: Entry): SecretSummary {
    return {
      namespace,
      name,
      keys: Object.keys(entry.data).sort(),
      hash: valuesHash({ data: entry.data, hashKey: entry.hashKey }).slice(0, 16),
      ...(entry.managedBy ? { managedBy: entry.managedBy } : {}),
      updatedAt: entry.updatedAt,
    };
  }

  /**
   * Creates or replaces a secret. `managedBy` is the GitSource that made it from a SOPS file; a
   * secret one source manages is that source's alone, and the API may not change it.
   */
  set(
    namespace: string,
    name: string,
    data: Record<string, Uint8Array>,
    options: { managedBy?: string } = {},
  ): { changed: boolean; summary: SecretSummary } {
    if (!DNS_LABEL.test(namespace) || !DNS_LABEL.test(name) || name.length > 63)
      throw new SecretInputError('a secret name must be a DNS-1123 label');
    checkSecretData(data);
    const id = objectKey(namespace, name);
    const previous = this.entries.get(id);
    if (previous && previous.managedBy !== options.managedBy)
      throw new SecretManagedError(
        previous.managedBy
          ? `secret "${name}" is managed by GitSource ${previous.managedBy}; change it in git`
          : `secret "${name}" exists and was not made from git; delete it first`,
      );
    const values: Record<string, Buffer> = {};
    for (const key of Object.keys(data).sort()) values[key] = Buffer.from(data[key] as Uint8Array);
    if (previous && sameData(previous.data, values))
      return { changed: false, summary: this.summaryOf(namespace, name, previous) };
    const entry: Entry = {
      data: values,
      // Kept across updates: the hash changes with the values only.
      hashKey: previous?.hashKey ?? randomBytes(16).toString('hex'),
      ...(options.managedBy ? { managedBy: options.managedBy } : {}),
      updatedAt: new Date().toISOString(),
    };
    this.write(namespace, name, this.seal(namespace, name, entry));
    this.entries.set(id, entry);
    this.notify(namespace, name);
    return { changed: true, summary: this.summaryOf(namespace, name, entry) };
  }

  /** Removes a secret; `managedBy` must match the secret's own (undefined for one made by hand). */
  delete(namespace: string, name: string, options: { managedBy?: string } = {}): boolean {
    const id = objectKey(namespace, name);
    const entry = this.entries.get(id);
    if (!entry) return false;
    if (entry.managedBy !== options.managedBy)
      throw new SecretManagedError(
        entry.managedBy
          ? `secret "${name}" is managed by GitSource ${entry.managedBy}; remove it from git`
          : `secret "${name}" was not made from git`,
      );
    rmSync(join(this.dir, namespace, `${name}.sealed`), { force: true });
    this.entries.delete(id);
    this.notify(namespace, name);
    return true;
  }

  /**
   * The SecretSink of SOPS files: the secrets `managedBy` (`namespace/source`) manages become exactly
   * these. A secret of the same name made by hand, or by another source, is not taken over.
   */
  async reconcile(
    namespace: string,
    managedBy: string,
    secrets: readonly { namespace: string; name: string; data: Record<string, Uint8Array> }[],
  ): Promise<void> {
    for (const secret of secrets) {
      const owner = this.entries.get(objectKey(namespace, secret.name))?.managedBy;
      if (this.entries.has(objectKey(namespace, secret.name)) && owner !== managedBy)
        throw new SecretManagedError(
          `Secret "${secret.name}" exists in ${namespace} and is not this source's (${owner ? `GitSource ${owner}` : 'made through the API'})`,
        );
    }
    for (const secret of secrets) this.set(namespace, secret.name, secret.data, { managedBy });
    const wanted = new Set(secrets.map((s) => s.name));
    for (const owned of this.managedBy(managedBy))
      if (owned.namespace === namespace && !wanted.has(owned.name))
        this.delete(namespace, owned.name, { managedBy });
  }

  /** The secrets a GitSource manages, by name. */
  managedBy(source: string): { namespace: string; name: string }[] {
    return [...this.entries]
      .filter(([, entry]) => entry.managedBy === source)
      .map(([id]) => {
        const { namespace, name } = splitObjectKey(id);
        return { namespace, name };
      });
  }

  private notify(namespace: string, name: string): void {
    for (const listener of this.listeners) {
      try {
        listener(namespace, name);
      } catch (error) {
        this.logger.warn({ err: (error as Error).message }, 'a secret listener failed');
      }
    }
  }

  private seal(namespace: string, name: string, entry: Entry): Buffer {
    const plain: Plain = {
      v: 1,
      data: Object.fromEntries(Object.entries(entry.data).map(([k, v]) => [k, v.toString('base64')])),
      hashKey: entry.hashKey,
      ...(entry.managedBy ? { managedBy: entry.managedBy } : {}),
      updatedAt: entry.updatedAt,
    };
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(`sless-secret-v1\0${namespace}/${name}`));
    const body = Buffer.concat([cipher.update(JSON.stringify(plain), 'utf8'), cipher.final()]);
    return Buffer.from(
      `${JSON.stringify({ v: 1, alg: 'AES-256-GCM', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: body.toString('base64') })}\n`,
    );
  }

  private unseal(namespace: string, name: string, file: Buffer): Entry {
    const sealed = JSON.parse(file.toString('utf8')) as { v: number; iv: string; tag: string; data: string };
    if (sealed.v !== 1) throw new Error(`sealed with format ${sealed.v}, which this sless does not read`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(`sless-secret-v1\0${namespace}/${name}`));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    const plain = JSON.parse(
      Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8'),
    ) as Plain;
    return {
      data: Object.fromEntries(Object.entries(plain.data).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
      hashKey: plain.hashKey,
      ...(plain.managedBy ? { managedBy: plain.managedBy } : {}),
      updatedAt: plain.updatedAt,
    };
  }

  /** Atomic and durable: a kill leaves the old file or the new one, never half of one. */
  private write(namespace: string, name: string, content: Buffer): void {
    const dir = join(this.dir, namespace);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const target = join(dir, `${name}.sealed`);
    const temp = `${target}.${process.pid}.tmp`;
    const fd = openSync(temp, 'w', 0o600);
    try {
      writeSync(fd, content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, target);
  }
}

function sameData(a: Record<string, Buffer>, b: Record<string, Buffer>): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => b[k] !== undefined && (a[k] as Buffer).equals(b[k] as Buffer));
}
