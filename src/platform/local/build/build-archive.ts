/**
 * The local platform's build history: one directory per build, `{stateDir}/builds/{ns}/{fn}/{buildKey}`,
 * with its `build.json`. Garbage collection lists and removes them here; staging directories left by a
 * build that a kill cut short are leftovers, removed whenever no running build owns them.
 */

import { type Dirent, existsSync } from 'node:fs';
import { readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BuildArchive, FunctionRef, StoredBuild } from '../../../core/interfaces.js';
import { objectKey } from '../../../core/object-key.js';
import type { BuildRecord } from '../../../core/resources.js';
import { commitMatches } from '../../../core/revision-ref.js';
import { type LocalBuilder, STAGING } from './local-builder.js';

export interface LocalBuildArchiveOptions {
  stateDir: string;
  builder: Pick<LocalBuilder, 'isBuilding' | 'activeStaging'>;
  /** Build directories that serve now or would after a restart (`LocalPlatform.pinnedBuildDirs`). */
  servingDirs(): ReadonlySet<string>;
  /**
   * The history limit. A function with no more builds than this has nothing past it, so its records
   * are not read: a pass with nothing to do costs a directory walk, not a file read per build.
   */
  limit: number;
  logger: Logger;
}

interface Entry {
  namespace: string;
  name: string;
  entry: string;
  path: string;
}

const list = (dir: string) => readdir(dir, { withFileTypes: true }).catch(() => [] as Dirent[]);

export class LocalBuildArchive implements BuildArchive {
  private readonly options: LocalBuildArchiveOptions;

  constructor(options: LocalBuildArchiveOptions) {
    this.options = options;
  }

  private get root(): string {
    return join(this.options.stateDir, 'builds');
  }

  /**
   * Every `builds/{ns}/{fn}/{entry}` directory, staging ones included; with `scope`, that function's
   * only. A scoped pass of the collector runs once per function a sync touched, so walking every
   * function's directory for each would make a thousand-function sync cost a million directory reads.
   */
  private async entries(scope?: FunctionRef): Promise<Entry[]> {
    const names = async (dir: string) =>
      (await list(dir)).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    const found: Entry[] = [];
    for (const ns of scope ? [scope.namespace] : await names(this.root)) {
      const functions = scope ? [scope.name] : await names(join(this.root, ns));
      const listed = await Promise.all(functions.map((fn) => names(join(this.root, ns, fn))));
      functions.forEach((name, i) => {
        for (const entry of listed[i] ?? [])
          found.push({ namespace: ns, name, entry, path: join(this.root, ns, name, entry) });
      });
    }
    return found;
  }

  async list(scope?: FunctionRef): Promise<StoredBuild[]> {
    const serving = this.options.servingDirs();
    const entries = await this.entries(scope);
    await this.removeStaging(entries);
    const finished = entries.filter((e) => !e.entry.includes(STAGING));
    const perFunction = new Map<string, number>();
    for (const { namespace, name } of finished)
      perFunction.set(objectKey(namespace, name), (perFunction.get(objectKey(namespace, name)) ?? 0) + 1);
    const builds: StoredBuild[] = [];
    for (const { namespace, name, entry, path } of finished) {
      const withinLimit = (perFunction.get(objectKey(namespace, name)) ?? 0) <= this.options.limit;
      const record = withinLimit ? undefined : await readRecord(path);
      builds.push({
        id: path,
        namespace,
        name,
        buildKey: entry,
        ...(record?.commit ? { commit: record.commit } : {}),
        // A directory without a readable record is no usable build: it sorts as the oldest.
        finishedAt: record?.finishedAt ?? '',
        running: this.options.builder.isBuilding(path),
        serving: serving.has(path),
      });
    }
    return builds;
  }

  async remove(build: StoredBuild): Promise<void> {
    await rm(build.id, { recursive: true, force: true });
    await this.removeIfEmpty(build.namespace, build.name);
  }

  /** A deleted function's directories go with its last build; rmdir refuses one still in use. */
  private async removeIfEmpty(namespace: string, name: string): Promise<void> {
    const fnDir = join(this.root, namespace, name);
    await rmdir(fnDir).catch(() => undefined);
    if (!existsSync(fnDir)) await rmdir(join(this.root, namespace)).catch(() => undefined);
  }

  /**
   * Removes staging directories that no running build owns: what a kill (or a failed clean-up) left.
   * At start-up nothing builds yet, so every staging directory found then goes.
   */
  removeLeftovers(): Promise<number> {
    return this.entries().then((entries) => this.removeStaging(entries));
  }

  private async removeStaging(entries: Entry[]): Promise<number> {
    const active = this.options.builder.activeStaging();
    let removed = 0;
    for (const { namespace, name, entry, path } of entries) {
      if (!entry.includes(STAGING) || active.has(path)) continue;
      await rm(path, { recursive: true, force: true });
      await this.removeIfEmpty(namespace, name);
      removed++;
    }
    if (removed > 0)
      this.options.logger.info({ removed }, 'removed staging directories of interrupted builds');
    return removed;
  }
}

async function readRecord(dir: string): Promise<BuildRecord | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, 'build.json'), 'utf8')) as BuildRecord;
  } catch {
    return undefined;
  }
}

/**
 * The kept successful build of a function made at `commit` (full or 12-digit), newest first if a
 * short SHA names more than one; undefined once garbage collection removed it (or it never existed).
 */
export async function findKeptBuild(
  stateDir: string,
  namespace: string,
  name: string,
  commit: string,
): Promise<BuildRecord | undefined> {
  const fnDir = join(stateDir, 'builds', namespace, name);
  const found: BuildRecord[] = [];
  for (const entry of await list(fnDir)) {
    if (!entry.isDirectory() || entry.name.includes(STAGING)) continue;
    const record = await readRecord(join(fnDir, entry.name));
    if (record?.result === 'Succeeded' && record.image && commitMatches(record.commit, commit))
      found.push(record);
  }
  return found.sort((a, b) => (b.finishedAt ?? '').localeCompare(a.finishedAt ?? ''))[0];
}
