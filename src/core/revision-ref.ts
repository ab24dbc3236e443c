/**
 * The `@ref` suffix of a function's path segment: `/fn/{ns}/{name}@{commit}` calls the build made at
 * that commit (a full or 12-digit SHA), `/fn/{ns}/{name}@{label}` a branch preview. Parsed once, here,
 * so the proxy, the platforms and the API agree on what a suffix may be.
 */
import { isDnsLabel } from './naming.js';

export type RevisionRef =
  | { kind: 'commit'; commit: string }
  /** A branch preview's label: a DNS label that is not all hex of a SHA's lengths. */
  | { kind: 'label'; label: string };

export interface ParsedFunctionSegment {
  name: string;
  ref?: RevisionRef;
}

const SHA = /^(?:[0-9a-f]{12}|[0-9a-f]{40})$/;

/**
 * Splits `name@ref`. Undefined when the segment is no function name with at most one valid suffix:
 * the caller answers 404 for it, as for any unknown function.
 */
export function parseFunctionSegment(segment: string): ParsedFunctionSegment | undefined {
  const at = segment.indexOf('@');
  if (at < 0) return isDnsLabel(segment) ? { name: segment } : undefined;
  const name = segment.slice(0, at);
  const ref = segment.slice(at + 1);
  if (!isDnsLabel(name)) return undefined;
  if (SHA.test(ref)) return { name, ref: { kind: 'commit', commit: ref } };
  if (isDnsLabel(ref)) return { name, ref: { kind: 'label', label: ref } };
  return undefined;
}

/** The 12-digit form a commit URL is shown with. */
export function commitPath(path: string, commit: string): string {
  return `${path}@${commit.slice(0, 12)}`;
}

/** True when the kept build's commit is the one asked for (full or 12-digit). */
export function commitMatches(built: string, asked: string): boolean {
  return asked.length === 40 ? built === asked : built.startsWith(asked);
}

/**
 * The 404 of a commit URL whose function has no kept build there: the same words on both platforms,
 * so a user reads the same answer wherever the function runs.
 */
export function noKeptBuildMessage(namespace: string, name: string, commit: string): string {
  return `function ${namespace}/${name} has no kept build at commit ${commit}: it was never built there, or its build was removed past the build history limit`;
}
