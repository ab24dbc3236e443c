/**
 * Where commits come from: a repository on this machine, read in place, or one behind smart HTTP,
 * fetched shallowly into a cache only when its branch head moved. A failed remote request is
 * reported without the server's answer or the URL, which may hold a token.
 */
import fs from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { HttpClient } from 'isomorphic-git';
import git from 'isomorphic-git';
import { SourceError } from '../core/errors.js';
import { sha256Hex } from '../core/hash.js';
import type { SourceReader, SourceSnapshot } from '../core/interfaces.js';
import { isNotFound, SnapshotCaches } from './git-snapshot.js';

export interface GitCredentials {
  username: string;
  password: string;
}

function branchRef(branch: string): string {
  return branch.startsWith('refs/') ? branch : `refs/heads/${branch}`;
}

/** How deep a remote's history is fetched to find a pinned commit below the shallow head. */
const PIN_HISTORY_DEPTH = 1000;

/** True when `commit` is `head` or an ancestor of it, with the objects this gitdir has. */
async function reaches(gitdir: string, cache: object, head: string, commit: string): Promise<boolean> {
  if (head === commit) return true;
  try {
    return await git.isDescendent({ fs, gitdir, oid: head, ancestor: commit, depth: -1, cache });
  } catch {
    // A missing object (unknown commit, or history cut by a shallow fetch) proves nothing.
    return false;
  }
}

/** Reads a repository on this machine in place, and notices commits through its refs at once. */
export class LocalRepositoryReader implements SourceReader {
  private readonly gitdir: string;
  private readonly branch: string;
  private readonly caches: SnapshotCaches;

  constructor(options: { path: string; branch: string }) {
    this.gitdir = fs.existsSync(join(options.path, '.git')) ? join(options.path, '.git') : options.path;
    this.caches = new SnapshotCaches(this.gitdir);
    this.branch = options.branch;
    if (!fs.existsSync(join(this.gitdir, 'HEAD'))) {
      throw new SourceError(`${options.path} is not a git repository`, 'RepositoryNotFound');
    }
  }

  async resolveHead(): Promise<string> {
    try {
      return await git.resolveRef({ fs, gitdir: this.gitdir, ref: branchRef(this.branch) });
    } catch (error) {
      if (isNotFound(error))
        throw new SourceError(`branch "${this.branch}" not found`, 'BranchNotFound', error);
      throw new SourceError(`cannot read branch "${this.branch}": ${String(error)}`, 'SourceFailed', error);
    }
  }

  async snapshot(commit: string): Promise<SourceSnapshot> {
    return this.caches.snapshot(commit);
  }

  async listBranches(): Promise<{ branch: string; commit: string }[]> {
    try {
      const names = await git.listBranches({ fs, gitdir: this.gitdir });
      return await Promise.all(
        names.map(async (branch) => ({
          branch,
          commit: await git.resolveRef({ fs, gitdir: this.gitdir, ref: branchRef(branch) }),
        })),
      );
    } catch (error) {
      throw new SourceError(`cannot list the branches: ${String(error)}`, 'SourceFailed', error);
    }
  }

  isOnBranch(commit: string, head: string): Promise<boolean> {
    return reaches(this.gitdir, this.caches.cache, head, commit);
  }

  /**
   * A commit rewrites a ref file or packed-refs; watching those gives sub-second pickup. Polling
   * stays on as the fallback, since fs.watch can miss events (network filesystems, editors, gc).
   */
  watch(onChange: () => void): () => void {
    const watchers: fs.FSWatcher[] = [];
    const tryWatch = (path: string, recursive: boolean) => {
      try {
        watchers.push(fs.watch(path, { recursive, persistent: false }, () => onChange()));
      } catch {
        // Missing directories (for example refs/heads in a fresh bare repo) are covered by polling.
      }
    };
    tryWatch(join(this.gitdir, 'refs', 'heads'), true);
    tryWatch(this.gitdir, false);
    return () => {
      for (const w of watchers) w.close();
    };
  }
}

/**
 * A repository behind smart HTTP. A poll only lists the server's refs; objects are fetched (shallow,
 * one branch) into a cache gitdir only when the head moved.
 */
export class RemoteRepositoryReader implements SourceReader {
  private readonly url: string;
  private readonly branch: string;
  private readonly gitdir: string;
  private readonly credentials: GitCredentials | undefined;
  private readonly http: HttpClient;
  private readonly caches: SnapshotCaches;
  private initialized: Promise<void> | undefined;
  private fetching: Promise<void> = Promise.resolve();
  private closed = false;

  /** `http` decides which addresses may be reached (see guardedGitHttp); the reader never picks one. */
  constructor(options: {
    url: string;
    branch: string;
    cacheDir: string;
    http: HttpClient;
    credentials?: GitCredentials;
  }) {
    this.url = options.url;
    this.http = options.http;
    this.branch = options.branch;
    this.credentials = options.credentials;
    this.gitdir = join(options.cacheDir, sha256Hex(`${options.url}\0${options.branch}`).slice(0, 24));
    this.caches = new SnapshotCaches(this.gitdir);
  }

  private auth() {
    const credentials = this.credentials;
    return credentials ? { onAuth: () => credentials } : {};
  }

  async resolveHead(): Promise<string> {
    const ref = branchRef(this.branch);
    let refs: { ref: string; oid: string }[];
    try {
      refs = await git.listServerRefs({ http: this.http, url: this.url, prefix: ref, ...this.auth() });
    } catch (error) {
      throw new SourceError(
        `cannot list refs of ${this.url}: ${describeHttpError(error)}`,
        'SourceUnreachable',
        error,
      );
    }
    const head = refs.find((r) => r.ref === ref);
    if (!head) throw new SourceError(`branch "${this.branch}" not found at ${this.url}`, 'BranchNotFound');
    return head.oid;
  }

  async snapshot(commit: string, branch = this.branch): Promise<SourceSnapshot> {
    await this.ensureGitdir();
    if (!(await this.hasCommit(commit))) {
      // The sync and every Function reconcile of the source ask at once after a push; whoever comes
      // second finds the commit fetched by the first instead of writing the same pack again.
      await this.oneFetchAtATime(async () => {
        if (!(await this.hasCommit(commit))) await this.fetchBranch(1, branch);
      });
      if (!(await this.hasCommit(commit))) {
        // The branch moved again between listing and fetching; the next sync picks the newer head.
        throw new SourceError(`commit ${commit} is no longer the head of "${branch}"`, 'HeadMoved');
      }
    }
    return this.caches.snapshot(commit);
  }

  /** One listing of the server's branches, through the same guarded client and credentials. */
  async listBranches(): Promise<{ branch: string; commit: string }[]> {
    let refs: { ref: string; oid: string }[];
    try {
      refs = await git.listServerRefs({
        http: this.http,
        url: this.url,
        prefix: 'refs/heads/',
        ...this.auth(),
      });
    } catch (error) {
      throw new SourceError(
        `cannot list refs of ${this.url}: ${describeHttpError(error)}`,
        'SourceUnreachable',
        error,
      );
    }
    return refs.map((r) => ({ branch: r.ref.slice('refs/heads/'.length), commit: r.oid }));
  }

  /**
   * Polls fetch the head only (depth 1), so an earlier commit may be missing or cut off from the head;
   * the history is then fetched once, PIN_HISTORY_DEPTH commits deep, and looked at again.
   */
  async isOnBranch(commit: string, head: string): Promise<boolean> {
    await this.snapshot(head);
    if ((await this.hasCommit(commit)) && (await reaches(this.gitdir, this.caches.cache, head, commit)))
      return true;
    await this.oneFetchAtATime(() => this.fetchBranch(PIN_HISTORY_DEPTH));
    return (await this.hasCommit(commit)) && reaches(this.gitdir, this.caches.cache, head, commit);
  }

  /**
   * Fetches into the cache gitdir never overlap: two at once write the same pack, refs and shallow
   * file, and a reader may see one half-written.
   */
  private oneFetchAtATime(task: () => Promise<void>): Promise<void> {
    const guarded = () =>
      this.closed ? Promise.reject(new SourceError(`the reader of ${this.url} is closed`)) : task();
    const run = this.fetching.then(guarded, guarded);
    this.fetching = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.fetching;
  }

  /** Fetches one branch only (the source's, or a preview's), `depth` commits deep. */
  private async fetchBranch(depth: number, branch = this.branch): Promise<void> {
    try {
      await git.fetch({
        fs,
        http: this.http,
        gitdir: this.gitdir,
        remote: 'origin',
        ref: branch,
        singleBranch: true,
        depth,
        tags: false,
        cache: this.caches.cache,
        ...this.auth(),
      });
    } catch (error) {
      throw new SourceError(`cannot fetch ${this.url}: ${describeHttpError(error)}`, 'FetchFailed', error);
    }
  }

  private ensureGitdir(): Promise<void> {
    this.initialized ??= (async () => {
      await mkdir(this.gitdir, { recursive: true });
      if (!fs.existsSync(join(this.gitdir, 'HEAD'))) await git.init({ fs, gitdir: this.gitdir, bare: true });
      // fetch needs a refspec; every fetch names its one branch (the source's or a preview's).
      await git.setConfig({ fs, gitdir: this.gitdir, path: 'remote.origin.url', value: this.url });
      await git.setConfig({
        fs,
        gitdir: this.gitdir,
        path: 'remote.origin.fetch',
        value: '+refs/heads/*:refs/remotes/origin/*',
      });
    })();
    return this.initialized;
  }

  private async hasCommit(oid: string): Promise<boolean> {
    try {
      await git.readCommit({ fs, gitdir: this.gitdir, oid, cache: this.caches.cache });
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * What a failed request says in status. Never the server's answer itself: a URL pointed at some
 * other service would otherwise copy that service's response (metrics, keys) into the tenant's
 * status. Only the status code, or the kind of failure, is kept; the URL may hold a token, so it is
 * not repeated either.
 */
export function describeHttpError(error: unknown): string {
  const data = (error as { data?: { statusCode?: number; statusMessage?: string } }).data;
  if (typeof data?.statusCode === 'number') return `HTTP ${data.statusCode}`;
  if (error instanceof SourceError) return error.message;
  const code = (error as { code?: unknown }).code;
  if (code === 'SmartHttpError' || code === 'ParseError' || code === 'EmptyServerResponseError')
    return 'the server did not answer as a git smart HTTP server';
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET')
    return 'the connection failed';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve';
  if (typeof code === 'string' && code.startsWith('UND_ERR_')) return 'the request failed or timed out';
  return 'the request failed';
}
