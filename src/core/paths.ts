/**
 * Repository-relative paths: the one place that decides whether a path from a manifest, a git tree
 * or a symlink stays inside the repository, which is how every reader refuses the ones that do not.
 */
import { posix } from 'node:path';

/**
 * Normalises a repository-relative path. Returns undefined when it is absolute or climbs out of the
 * repository, which is how every caller refuses such paths. The root is ''.
 */
export function normalizeRepoPath(path: string): string | undefined {
  if (path.includes('\0') || path.includes('\\')) return undefined;
  if (posix.isAbsolute(path)) return undefined;
  // Stryker disable next-line ConditionalExpression,StringLiteral: equivalent, posix.normalize('') is '.' too
  const normalized = posix.normalize(path === '' ? '.' : path);
  if (normalized === '..' || normalized.startsWith('../')) return undefined;
  // Stryker disable next-line Regex: equivalent, normalize already collapsed repeated slashes
  const trimmed = normalized.replace(/\/+$/, '');
  return trimmed === '.' ? '' : trimmed;
}

/** True when `path` is `dir` itself or below it (both normalised, '' being the root). */
export function isWithin(dir: string, path: string): boolean {
  return dir === '' || path === dir || path.startsWith(`${dir}/`);
}

/** Resolves a symlink target (as stored in git) against the link's location, inside the repository. */
export function resolveLinkTarget(linkPath: string, target: string): string | undefined {
  if (posix.isAbsolute(target)) return undefined;
  return normalizeRepoPath(posix.join(posix.dirname(linkPath), target));
}
