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

  async snapshot(commit: string): Promise<SourceSnapshot> {
    await this.ensureGitdir();
    if (!(await this.hasCommit(commit))) {
      try {
        await git.fetch({
          fs,
          http: this.http,
          gitdir: this.gitdir,
          remote: 'origin',
          ref: this.branch,
          singleBranch: true,
          depth: 1,
          tags: false,
          cache: this.caches.cache,
          ...this.auth(),
        });
      } catch (error) {
        throw new SourceError(`cannot fetch ${this.url}: ${describeHttpError(error)}`, 'FetchFailed', error);
      }
      if (!(await this.hasCommit(commit))) {
        // The branch moved again between listing and fetching; the next sync picks the newer head.
        throw new SourceError(`commit ${commit} is no longer the head of "${this.branch}"`, 'HeadMoved');
      }
    }
    return this.caches.snapshot(commit);
  }

  private ensureGitdir(): Promise<void> {
    this.initialized ??= (async () => {
      await mkdir(this.gitdir, { recursive: true });
      if (!fs.existsSync(join(this.gitdir, 'HEAD'))) await git.init({ fs, gitdir: this.gitdir, bare: true });
      // fetch needs a refspec; only this branch is ever tracked.
      await git.setConfig({ fs, gitdir: this.gitdir, path: 'remote.origin.url', value: this.url });
      await git.setConfig({
        fs,
        gitdir: this.gitdir,
        path: 'remote.origin.fetch',
        value: `+refs/heads/${this.branch}:refs/remotes/origin/${this.branch}`,
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
