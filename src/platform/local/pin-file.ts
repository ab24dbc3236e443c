/**
 * Local mode keeps objects in memory, so a pin (spec.ref.commit) set through the API is written to
 * `{stateDir}/pins.json` and put back on the source at start: after a restart sless serves the
 * pinned commit, not the branch head. A pin is only restored for the same repository and branch.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { GitSource } from '../../core/resources.js';

interface SavedPin {
  url: string;
  branch: string;
  commit: string;
}

export class PinFile {
  private readonly path: string;
  private writing: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.path = path;
  }

  private async load(): Promise<Record<string, SavedPin>> {
    try {
      return JSON.parse(await readFile(this.path, 'utf8')) as Record<string, SavedPin>;
    } catch {
      return {};
    }
  }

  /** The source with its saved pin, when one was saved for this repository and branch. */
  async restore(source: GitSource): Promise<GitSource> {
    const saved = (await this.load())[`${source.metadata.namespace}/${source.metadata.name}`];
    if (!saved || saved.url !== source.spec.url || saved.branch !== (source.spec.branch ?? 'main'))
      return source;
    return { ...source, spec: { ...source.spec, ref: { commit: saved.commit } } };
  }

  /** Saves the source's pin (or its absence); writes are serialised and atomic. */
  record(source: GitSource): Promise<void> {
    this.writing = this.writing.then(async () => {
      const pins = await this.load();
      const key = `${source.metadata.namespace}/${source.metadata.name}`;
      const commit = source.spec.ref?.commit;
      if (commit) pins[key] = { url: source.spec.url, branch: source.spec.branch ?? 'main', commit };
      else delete pins[key];
      await mkdir(dirname(this.path), { recursive: true });
      const staging = `${this.path}.${process.pid}.tmp`;
      const sorted = Object.fromEntries(Object.entries(pins).sort(([a], [b]) => (a < b ? -1 : 1)));
      await writeFile(staging, `${JSON.stringify(sorted, null, 2)}\n`);
      await rename(staging, this.path);
    });
    return this.writing;
  }
}
