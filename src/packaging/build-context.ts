/**
 * The kaniko build context of one function at one commit: a deterministic tar.gz (sorted entries,
 * fixed mtime, no owner or host metadata, normalised modes) holding the runtime's pinned Dockerfile,
 * its server files and `code/`, the function's files straight from git objects minus manifests.
 * The same inputs give the same bytes, so a context can be compared, cached and re-uploaded safely.
 */
import { chmod, cp, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { create as createTar } from 'tar';
import type { SourceSnapshot } from '../core/interfaces.js';
import { OwnedTempDirs } from '../core/owned-temp-dirs.js';
import { RUNTIME_INFO, type RuntimeFamily } from '../core/runtimes.js';
import { RUNTIMES, type RuntimeName } from '../core/schemas.js';
import { materializeFunction } from './materialize.js';

/** What each runtime family's Dockerfile expects beside `code/` (see runtimes/*\/Dockerfile). */
const FAMILY_CONTEXT_FILES: Readonly<Record<RuntimeFamily, readonly string[]>> = {
  node: ['Dockerfile', 'server.js'],
  python: ['Dockerfile', 'server.py'],
  go: ['Dockerfile', 'build.sh', 'sdk'],
};

/** What each runtime's Dockerfile expects beside `code/`, from its server directory. */
export const RUNTIME_CONTEXT_FILES: Readonly<Record<RuntimeName, readonly string[]>> = Object.fromEntries(
  RUNTIMES.map((r) => [r, FAMILY_CONTEXT_FILES[RUNTIME_INFO[r].family]]),
) as Record<RuntimeName, readonly string[]>;

export const FIXED_MTIME = new Date('2000-01-01T00:00:00Z');

/**
 * Where contexts are staged, made on first use: making it removes the staging directories of writers
 * killed mid-write (SIGKILL, OOM), which no `finally` of theirs could remove.
 */
let stagingDirs: OwnedTempDirs | undefined;

export interface BuildContext {
  /** gzip-compressed tar. */
  archive: Buffer;
  /** Entry paths in archive order (directories end with '/'). */
  entries: string[];
}

export async function createBuildContext(options: {
  runtime: RuntimeName;
  runtimesDir: string;
  snapshot: SourceSnapshot;
  codeDir: string;
  excludedFiles: ReadonlySet<string>;
}): Promise<BuildContext> {
  stagingDirs ??= new OwnedTempDirs('sless-context-');
  const staging = await stagingDirs.create();
  try {
    for (const file of RUNTIME_CONTEXT_FILES[options.runtime])
      await cp(
        join(options.runtimesDir, RUNTIME_INFO[options.runtime].serverDir, file),
        join(staging, file),
        {
          recursive: true,
        },
      );
    await materializeFunction({
      snapshot: options.snapshot,
      codeDir: options.codeDir,
      excludedFiles: options.excludedFiles,
      target: join(staging, 'code'),
    });
    const entries = await walk(staging, '');
    const stream = createTar(
      { gzip: { level: 9 }, cwd: staging, portable: true, mtime: FIXED_MTIME, noDirRecurse: true },
      entries,
    );
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(Buffer.from(chunk));
    } finally {
      // tar's gzip (minizlib) does not close its zlib handle when the stream ends (its 'end' listener
      // returns `this.close` without calling it), so the deflate state, ~270 KB of malloc'd memory at
      // level 9, stays until a full GC collects the handle: a first sync of many functions builds
      // dozens at once, and the allocator keeps the memory they held.
      stream.zip?.close();
    }
    return { archive: Buffer.concat(chunks), entries };
  } finally {
    await stagingDirs.remove(staging);
  }
}

/** Sorted paths under `dir`, directories before their contents; modes normalised to 755/644. */
export async function walk(root: string, relative: string): Promise<string[]> {
  const out: string[] = [];
  const names = (await readdir(join(root, relative))).sort();
  for (const name of names) {
    const path = relative ? `${relative}/${name}` : name;
    const full = join(root, path);
    const stat = await lstat(full);
    if (stat.isSymbolicLink()) {
      out.push(path);
    } else if (stat.isDirectory()) {
      await chmod(full, 0o755);
      out.push(`${path}/`, ...(await walk(root, path)));
    } else {
      await chmod(full, stat.mode & 0o111 ? 0o755 : 0o644);
      out.push(path);
    }
  }
  return out;
}
