/**
 * The names sless derives for what it makes (tenant namespaces, builds, function paths, scoped
 * environment variables), kept within Kubernetes' DNS-label rules and made so that two different
 * inputs never share a name.
 */
import { sha256Hex } from './hash.js';

export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
export const DNS_LABEL_MAX = 63;

export function isDnsLabel(value: string): boolean {
  return value.length <= DNS_LABEL_MAX && DNS_LABEL.test(value);
}

/** The namespace a JWT subject owns: `sless-` + the first 16 hex digits of sha256(sub). */
export function tenantNamespace(subject: string): string {
  return `sless-${sha256Hex(subject).slice(0, 16)}`;
}

/**
 * Truncates `prefix-name-suffix` to a DNS label. When the name has to be cut, a short hash of the
 * whole keeps two long names from colliding.
 */
export function boundedName(parts: readonly string[], suffix: string): string {
  const full = [...parts, suffix].join('-');
  if (full.length <= DNS_LABEL_MAX) return full;
  const digest = sha256Hex(full).slice(0, 6);
  const room = DNS_LABEL_MAX - suffix.length - digest.length - 2;
  const head = parts.join('-').slice(0, room).replace(/-+$/, '');
  return `${head}-${digest}-${suffix}`;
}

/** `build-{fn}-{sha12}`: derived from function and commit, so a build is created at most once. */
export function buildName(functionName: string, commit: string): string {
  return boundedName(['build', functionName], commit.slice(0, 12));
}

export function functionPath(namespace: string, name: string): string {
  return `/fn/${namespace}/${name}`;
}

/**
 * The env form of one namespaced name: `NS__NAME`, upper case, `-` written as `_`. Names are DNS
 * labels, which never start or end with `-`; with `--` ruled out, the `__` can only be the separator,
 * so two different (namespace, name) pairs never share a variable.
 */
export function scopedEnvSuffix(namespace: string, name: string): string | undefined {
  if (namespace.includes('--') || name.includes('--')) return undefined;
  const part = (text: string) => text.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return `${part(namespace)}__${part(name)}`;
}
