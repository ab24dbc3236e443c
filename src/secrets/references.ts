/**
 * What a Function asks of secrets: `spec.env` values that reference a key, and `spec.secrets`
 * mounted as files. Both resolve in the function's own namespace only; nothing here ever takes a
 * namespace from the manifest.
 */
import { createHash, createHmac } from 'node:crypto';
import type { ObjectStore } from '../core/interfaces.js';
import type { ReconcileRequests } from '../core/reconcile-requests.js';
import type { SlessFunction } from '../core/resources.js';
import type { EnvValue, SecretKeyRef } from '../core/schemas.js';

/** One secret as a platform holds it. Values never leave the platform's process but to the function. */
export interface SecretValues {
  /** key → value. */
  readonly data: Readonly<Record<string, Uint8Array>>;
  /**
   * A per-secret key that hashes are keyed with (the Secret's uid on kube, a key kept beside the
   * local store's): a hash in a pod template or an API answer cannot be checked against guesses
   * of the value by someone who cannot read the secret itself.
   */
  readonly hashKey: string;
}

/** Reads secrets of one namespace; undefined when the secret does not exist. */
export interface SecretReader {
  get(namespace: string, name: string): Promise<SecretValues | undefined>;
}

export interface EnvSecretRef extends SecretKeyRef {
  /** The variable it becomes. */
  env: string;
}

export interface FunctionSecretRefs {
  /** Sorted by variable name. */
  env: EnvSecretRef[];
  /** In manifest order. */
  volumes: { name: string; mountPath: string }[];
}

export function isSecretRef(value: EnvValue | undefined): value is { secretRef: SecretKeyRef } {
  return typeof value === 'object' && value !== null && typeof value.secretRef === 'object';
}

/** The plain (non-secret) variables of `spec.env`, sorted by name. */
export function plainEnv(fn: Pick<SlessFunction, 'spec'>): [string, string][] {
  return Object.entries(fn.spec.env ?? {})
    .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export function secretRefsOf(fn: Pick<SlessFunction, 'spec'>): FunctionSecretRefs {
  const env: EnvSecretRef[] = [];
  for (const [name, value] of Object.entries(fn.spec.env ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)))
    if (isSecretRef(value)) env.push({ env: name, name: value.secretRef.name, key: value.secretRef.key });
  const volumes = (fn.spec.secrets ?? []).map((s) => ({ name: s.name, mountPath: s.mountPath }));
  return { env, volumes };
}

export function referencesSecret(fn: Pick<SlessFunction, 'spec'>, name: string): boolean {
  const refs = secretRefsOf(fn);
  return refs.env.some((r) => r.name === name) || refs.volumes.some((v) => v.name === name);
}

export function hasSecretRefs(fn: Pick<SlessFunction, 'spec'>): boolean {
  const refs = secretRefsOf(fn);
  return refs.env.length > 0 || refs.volumes.length > 0;
}

/** A reference that does not resolve: the secret, or one key of it, is not there. */
export interface MissingSecret {
  name: string;
  key?: string;
}

export function describeMissing(namespace: string, missing: MissingSecret): string {
  return missing.key === undefined
    ? `secret "${missing.name}" not found in namespace ${namespace}`
    : `secret "${missing.name}" has no key "${missing.key}" in namespace ${namespace}`;
}

export type Resolution =
  | { ok: true; hash: string; secrets: ReadonlyMap<string, SecretValues> }
  | { ok: false; missing: MissingSecret };

/**
 * Reads every secret the function references, in its own namespace, and hashes what it uses: the
 * hash changes when a referenced value changes (a rotation rolls the function) and says nothing
 * about the values to anyone without the secret. `hash` is '' when the function references none.
 */
export async function resolveSecrets(reader: SecretReader, fn: SlessFunction): Promise<Resolution> {
  const refs = secretRefsOf(fn);
  const namespace = fn.metadata.namespace;
  const secrets = new Map<string, SecretValues>();
  const names = [...new Set([...refs.env.map((r) => r.name), ...refs.volumes.map((v) => v.name)])].sort();
  for (const name of names) {
    const secret = await reader.get(namespace, name);
    if (!secret) return { ok: false, missing: { name } };
    secrets.set(name, secret);
  }
  for (const ref of refs.env)
    if (!Object.hasOwn(secrets.get(ref.name)?.data ?? {}, ref.key))
      return { ok: false, missing: { name: ref.name, key: ref.key } };
  if (names.length === 0) return { ok: true, hash: '', secrets };
  const outer = createHash('sha256');
  for (const ref of refs.env) outer.update(`env\0${ref.env}\0${ref.name}\0${ref.key}\0`);
  for (const volume of refs.volumes) outer.update(`file\0${volume.name}\0${volume.mountPath}\0`);
  for (const name of names) {
    const secret = secrets.get(name) as SecretValues;
    outer.update(`${name}\0${valuesHash(secret)}\0`);
  }
  return { ok: true, hash: outer.digest('hex').slice(0, 16), secrets };
}

/** A keyed hash of every key and value of one secret (what the local API shows of it). */
export function valuesHash(secret: SecretValues): string {
  const mac = createHmac('sha256', `sless-secret\0${secret.hashKey}`);
  for (const key of Object.keys(secret.data).sort()) {
    const value = secret.data[key] as Uint8Array;
    mac.update(`${key.length}:${key}${value.byteLength}:`);
    mac.update(value);
  }
  return mac.digest('hex');
}

/**
 * Queues every Function of the namespace that references the secret (a rotation rolls them), from
 * the store's watch cache where it keeps one, else from a list.
 */
export async function requeueReferencing(
  store: ObjectStore,
  requests: Pick<ReconcileRequests, 'request'>,
  namespace: string,
  name: string,
): Promise<void> {
  const refers = (fn: SlessFunction) => fn.metadata.namespace === namespace && referencesSecret(fn, name);
  const functions = store.cached?.('Function', refers) ?? (await store.list('Function', { namespace }));
  for (const fn of functions.filter(refers)) requests.request('Function', namespace, fn.metadata.name);
}
