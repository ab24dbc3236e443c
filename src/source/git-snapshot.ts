/**
 * One commit read straight from a gitdir's objects, with no checkout, as the SourceSnapshot that
 * loading and building read from. Snapshots of one repository share their caches, so a commit that
 * changes one function costs about that function.
 */
import fs from 'node:fs';
import git from 'isomorphic-git';
import { SourceError } from '../core/errors.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { normalizeRepoPath } from '../core/paths.js';
import { ObjectSizeReader } from './object-size.js';

/**
 * Tree listings keyed by tree oid. Trees are content-addressed, so a listing never goes stale and a
 * commit that changes one function re-reads only the trees on the changed paths.
 */
export class TreeListingCache {
  private readonly listings = new Map<string, TreeFile[]>();
  private readonly limit: number;
  constructor(limit = 5000) {
    this.limit = limit;
  }
  get(oid: string): TreeFile[] | undefined {
    return this.listings.get(oid);
  }
  set(oid: string, files: TreeFile[]): void {
    if (this.listings.size >= this.limit) this.listings.clear();
    this.listings.set(oid, files);
  }
}

/** What the snapshots of one gitdir share: isomorphic-git's object cache, tree listings and sizes. */
export class SnapshotCaches {
  readonly cache = {};
  readonly listings = new TreeListingCache();
  private readonly gitdir: string;
  private sizes: ObjectSizeReader | undefined;

  constructor(gitdir: string) {
    this.gitdir = gitdir;
  }

  snapshot(commit: string): GitSnapshot {
    this.sizes ??= new ObjectSizeReader(this.gitdir);
    return new GitSnapshot({
      gitdir: this.gitdir,
      commit,
      cache: this.cache,
      listings: this.listings,
      sizes: this.sizes,
    });
  }
}

/** A commit read straight from a gitdir's objects: no checkout, no working tree. */
export class GitSnapshot implements SourceSnapshot {
  readonly commit: string;
  private readonly gitdir: string;
  private readonly cache: object;
  private readonly listings: TreeListingCache;
  private readonly sizes: ObjectSizeReader | undefined;

  constructor(options: {
    gitdir: string;
    commit: string;
    cache: object;
    listings: TreeListingCache;
    sizes?: ObjectSizeReader;
  }) {
    this.gitdir = options.gitdir;
    this.sizes = options.sizes;
    this.commit = options.commit;
    this.cache = options.cache;
    this.listings = options.listings;
  }

  /** The commit message's first line, for people reading status; undefined when it cannot be read. */
  async summary(): Promise<string | undefined> {
    try {
      const { commit } = await git.readCommit({
        fs,
        gitdir: this.gitdir,
        oid: this.commit,
        cache: this.cache,
      });
      return commitSummary(commit.message);
    } catch {
      return undefined;
    }
  }

  async listFiles(dir: string): Promise<TreeFile[]> {
    const normalized = normalizeRepoPath(dir);
    if (normalized === undefined) throw new SourceError(`path "${dir}" leaves the repository`, 'InvalidPath');
    let treeOid: string;
    try {
      const { oid } = await git.readTree({
        fs,
        gitdir: this.gitdir,
        oid: this.commit,
        filepath: normalized === '' ? undefined : normalized,
        cache: this.cache,
      });
      treeOid = oid;
    } catch (error) {
      if (isNotFound(error)) return [];
      throw error;
    }
    const files = await this.listTree(treeOid, normalized);
    return files;
  }

  private async listTree(treeOid: string, prefix: string): Promise<TreeFile[]> {
    const cached = this.listings.get(`${treeOid}:${prefix}`);
    if (cached) return cached;
    const { tree } = await git.readTree({ fs, gitdir: this.gitdir, oid: treeOid, cache: this.cache });
    const files: TreeFile[] = [];
    for (const entry of tree) {
      const path = prefix === '' ? entry.path : `${prefix}/${entry.path}`;
      if (entry.type === 'tree') files.push(...(await this.listTree(entry.oid, path)));
      else if (entry.type === 'blob') files.push({ path, mode: entry.mode, oid: entry.oid });
      // Submodules (type 'commit') have no content in this repository; they are skipped.
    }
    files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    this.listings.set(`${treeOid}:${prefix}`, files);
    return files;
  }

  async fileSize(file: TreeFile): Promise<number | undefined> {
    return this.sizes?.size(file.oid);
  }

  async readFile(path: string, oid?: string): Promise<Uint8Array> {
    const normalized = normalizeRepoPath(path);
    if (normalized === undefined || normalized === '') {
      throw new SourceError(`path "${path}" leaves the repository`, 'InvalidPath');
    }
    // Resolving a path re-reads every tree above it: with a thousand functions in one directory that
    // is a thousand-entry tree per file read.
    if (oid !== undefined)
      return (await git.readBlob({ fs, gitdir: this.gitdir, oid, cache: this.cache })).blob;
    const { blob } = await git.readBlob({
      fs,
      gitdir: this.gitdir,
      oid: this.commit,
      filepath: normalized,
      cache: this.cache,
    });
    return blob;
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof Error && (error as { code?: string }).code === 'NotFoundError';
}

/** The first line of a commit message, bounded: a status field, not a copy of the message. */
export function commitSummary(message: string): string {
  const first = message.split('\n', 1)[0]?.trim() ?? '';
  return first.length > 200 ? `${first.slice(0, 199)}…` : first;
}
