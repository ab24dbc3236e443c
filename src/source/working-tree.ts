/**
 * A directory on disk seen as a commit would be, so that `sless validate` checks uncommitted files
 * with the same loader the controller runs; symlinks are listed as git stores them and never
 * followed.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { SourceError } from '../core/errors.js';
import type { SourceSnapshot, TreeFile } from '../core/interfaces.js';
import { normalizeRepoPath } from '../core/paths.js';

/** Directories a repository snapshot never contains (git's own) or that sless never reads. */
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

/** The object id git gives a blob, so a working tree hashes like the commit it would become. */
function blobOid(bytes: Uint8Array): string {
  return createHash('sha1').update(`blob ${bytes.byteLength}\0`).update(bytes).digest('hex');
}

/**
 * A working tree on disk seen as a SourceSnapshot, so `sless validate` runs the controller's own
 * loader over uncommitted files. Symlinks are listed with git's mode 120000 and never followed,
 * exactly as a commit stores them, so nothing outside the directory is ever read.
 */
export class WorkingTreeSnapshot implements SourceSnapshot {
  readonly commit = 'working-tree';
  private readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  async listFiles(dir: string): Promise<TreeFile[]> {
    const normalized = normalizeRepoPath(dir);
    if (normalized === undefined) throw new SourceError(`path "${dir}" leaves the repository`, 'InvalidPath');
    const files: TreeFile[] = [];
    await this.walk(normalized, files);
    files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return files;
  }

  private async walk(dir: string, into: TreeFile[]): Promise<void> {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(join(this.root, dir), { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries) {
      const path = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) await this.walk(path, into);
      } else if (entry.isSymbolicLink()) {
        const target = await readlink(join(this.root, path));
        into.push({ path, mode: '120000', oid: blobOid(Buffer.from(target)) });
      } else if (entry.isFile()) {
        const full = join(this.root, path);
        const stats = await lstat(full);
        into.push({
          path,
          mode: stats.mode & 0o111 ? '100755' : '100644',
          oid: blobOid(await readFile(full)),
        });
      }
    }
  }

  async readFile(path: string): Promise<Uint8Array> {
    const normalized = normalizeRepoPath(path);
    if (normalized === undefined || normalized === '')
      throw new SourceError(`path "${path}" leaves the repository`, 'InvalidPath');
    const full = join(this.root, normalized);
    const stats = await lstat(full);
    if (!stats.isFile()) throw new SourceError(`"${path}" is not a regular file`, 'InvalidPath');
    return readFile(full);
  }
}
