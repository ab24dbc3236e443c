import { readdirSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leftBehind } from '../../core/left-behind.js';

const PREFIX = 'sless-fn-';
const OWNED = /^sless-fn-(\d+)-/;

/**
 * One short-lived directory per function process, holding its unix socket. They sit in the system's
 * temp directory because a socket path must stay under 108 bytes, wherever the state directory is;
 * the name carries sless's pid so that a later start removes what a killed one left behind.
 */
export class SocketDirs {
  private readonly root: string;

  constructor(root: string = tmpdir()) {
    this.root = root;
    this.sweepStale();
  }

  create(): Promise<string> {
    return mkdtemp(join(this.root, `${PREFIX}${process.pid}-`));
  }

  async remove(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }

  private sweepStale(): void {
    let entries: string[] = [];
    try {
      entries = readdirSync(this.root);
    } catch {
      return;
    }
    for (const entry of entries)
      if (leftBehind(entry, OWNED)) rmSync(join(this.root, entry), { recursive: true, force: true });
  }
}
