/**
 * Short-lived temporary directories (function sockets, build staging) that are cleaned up even
 * after a crash: each is named after the process that made it, so a later start removes the ones
 * whose owner was killed.
 */
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
  /** Made here and not removed yet. */
  private readonly live = new Set<string>();
  /** Removals under way: a stop waits for them too. */
  private readonly removing = new Set<Promise<void>>();

  /** `prefix`: letters, digits and dashes. */
  constructor(
    private readonly prefix: string,
    private readonly root: string = tmpdir(),
  ) {
    this.owned = new RegExp(`^${prefix}(\\d+)-`);
    this.removeLeftBehind();
  }

  async create(): Promise<string> {
    const dir = await mkdtemp(join(this.root, `${this.prefix}${process.pid}-`));
    this.live.add(dir);
    return dir;
  }

  remove(dir: string): Promise<void> {
    this.live.delete(dir);
    const removal: Promise<void> = rm(dir, { recursive: true, force: true })
      .catch(() => undefined)
      .finally(() => this.removing.delete(removal));
    this.removing.add(removal);
    return removal;
  }

  /**
   * Removes every directory made here that is still there, and waits for removals already under
   * way: those that exit listeners start would otherwise still be running when the process exits.
   */
  async removeAll(): Promise<void> {
    for (const dir of [...this.live]) void this.remove(dir);
    await Promise.all([...this.removing]);
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
