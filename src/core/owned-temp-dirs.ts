import { readdirSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leftBehind } from './left-behind.js';

/**
 * Short-lived directories named after the process that makes them (`{prefix}{pid}-XXXXXX`), so that
 * one left by a process killed mid-use (SIGKILL, OOM) can be told from one still in use: making the
 * set removes what gone owners left behind.
 */
export class OwnedTempDirs {
  private readonly owned: RegExp;

  /** `prefix`: letters, digits and dashes. */
  constructor(
    private readonly prefix: string,
    private readonly root: string = tmpdir(),
  ) {
    this.owned = new RegExp(`^${prefix}(\\d+)-`);
    this.removeLeftBehind();
  }

  create(): Promise<string> {
    return mkdtemp(join(this.root, `${this.prefix}${process.pid}-`));
  }

  async remove(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }

  /** Removes the directories whose owner is gone; returns their names, sorted. */
  removeLeftBehind(): string[] {
    let entries: string[];
    try {
      entries = readdirSync(this.root);
    } catch {
      return [];
    }
    const gone = entries.filter((entry) => leftBehind(entry, this.owned)).sort();
    for (const entry of gone) rmSync(join(this.root, entry), { recursive: true, force: true });
    return gone;
  }
}
