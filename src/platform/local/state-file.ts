/**
 * Durable state in local mode's state directory: a versioned JSON document, with an optional
 * journal of changes, that survives kill -9 and power loss, coalesces writes so a busy server stays
 * cheap, and sets a damaged or unknown file aside instead of failing the start. What local mode
 * keeps across restarts is written through it.
 */
import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';

export interface StateFileOptions<T> {
  path: string;
  /** The format this code writes; a file of another version is set aside, never guessed at. */
  version: number;
  logger: Logger;
  /** Checks the payload's shape and returns it typed; throws (with the reason) when it is not. */
  decode(payload: unknown): T;
  /**
   * With this, `save` may be given the change it records, and the change is appended to a journal
   * beside the document instead of the whole document being written again. Loading applies the
   * journal's changes, in order, to the parsed payload before `decode` checks it.
   */
  replay?(payload: unknown, changes: unknown[]): unknown;
  /** The journal grows to the document's size, and at least this (default 256 KiB), between rewrites. */
  minJournalBytes?: number;
}

const MIN_JOURNAL_BYTES = 256 * 1024;

/** A document's `data` already serialised, so a large one is not stringified whole on each write. */
export class JsonText {
  constructor(readonly text: string) {}
}

/**
 * The JSON text of each entry of a keyed collection, made once and kept until that entry changes. A
 * state file holding a thousand functions is written after each change to any one of them; with this
 * a write costs one stringify of what changed plus a join, not a copy and a stringify of everything.
 * Values must not be mutated in place: the owner replaces them and calls `forget`.
 */
export class JsonTextCache {
  private readonly texts = new Map<string, string>();

  of(key: string, value: unknown): string {
    let text = this.texts.get(key);
    if (text === undefined) {
      text = JSON.stringify(value);
      this.texts.set(key, text);
    }
    return text;
  }

  forget(key: string): void {
    this.texts.delete(key);
  }

  /** `{"key":value,…}` of these entries, keys sorted, for a document that is a keyed record. */
  record(entries: Iterable<[string, unknown]>): string {
    const sorted = [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${sorted.map(([key, value]) => `${JSON.stringify(key)}:${this.of(key, value)}`).join(',')}}`;
  }
}

/**
 * One JSON document in the state directory, `{ "version": N, "data": … }`, that survives kill -9 and
 * power loss: every write goes to a temporary file, is flushed to disk, then renamed over the old one,
 * so a reader sees either the previous document or the new one, never half of one.
 *
 * A document with a `replay` also has a journal, `<path>.journal`: one line per change since the
 * document was written, `{"seq":N,"change":…}`, each flushed to disk before its caller hears back. A
 * status change of one function among a thousand then writes one small line, not the whole store
 * again. Once the journal is as large as the document, the next write is the whole document, which
 * records the last sequence number it covers (`journaled`), and the journal is removed. A kill
 * between the two leaves lines the document covers; loading skips them by their sequence numbers.
 *
 * Writes are coalesced: callers that ask while a write runs share the next one, which serialises the
 * state as it is when that write starts. Each caller's promise resolves once a write that includes its
 * change is on disk, so what a caller does next (start a process, report a status) never runs ahead
 * of what a restart would find.
 */
export class StateFile<T> {
  private readonly options: StateFileOptions<T>;
  private waiters: { resolve: () => void; change: string | undefined }[] = [];
  private writing: Promise<void> | undefined;
  private latest: (() => T | JsonText) | undefined;
  private closed = false;
  /** The last sequence number written, in the document or the journal. */
  private sequence = 0;
  private documentBytes = 0;
  private journalBytes = 0;
  /** The next write is the whole document: none was written yet, or the journal needs replacing. */
  private writeDocumentNext = true;

  constructor(options: StateFileOptions<T>) {
    this.options = options;
  }

  get path(): string {
    return this.options.path;
  }

  private get journalPath(): string {
    return `${this.options.path}.journal`;
  }

  /**
   * The stored document, or undefined when there is none. A file that cannot be read, does not parse,
   * has the wrong shape or comes from a newer sless is renamed aside (kept for a person to look at) and
   * reported as a warning: sless then starts as if it had no state, and never crashes on it.
   */
  async load(): Promise<T | undefined> {
    const { path, version, logger } = this.options;
    await this.removeTemporaryFiles();
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (thrown) {
      if ((thrown as NodeJS.ErrnoException).code === 'ENOENT') {
        // Only a document's writer starts a journal: one without it holds nothing to apply.
        await this.setJournalAside('has no document to apply to');
        return undefined;
      }
      return this.setAside(`cannot be read: ${asError(thrown).message}`);
    }
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch (thrown) {
      return this.setAside(`is not JSON: ${asError(thrown).message}`);
    }
    const found = (document as { version?: unknown } | null)?.version;
    if (typeof found !== 'number' || !Number.isInteger(found))
      return this.setAside('has no integer "version" field');
    if (found !== version)
      return this.setAside(
        found > version
          ? `has version ${found}, written by a newer sless (this one reads version ${version})`
          : `has version ${found}, which this sless no longer reads (it reads version ${version})`,
      );
    const journaled = (document as { journaled?: unknown }).journaled;
    this.sequence = typeof journaled === 'number' && Number.isInteger(journaled) ? journaled : 0;
    this.documentBytes = text.length;
    try {
      const payload = (document as { data?: unknown }).data;
      const changes = await this.journalChanges();
      // What the journal held (a cut-short line included) goes into the next write of the document.
      this.writeDocumentNext = this.journalBytes > 0;
      if (changes.length > 0 && this.options.replay) {
        try {
          return this.options.decode(this.options.replay(payload, changes));
        } catch (thrown) {
          // Changes the document does not take cost only themselves, not the document as well.
          await this.setJournalAside(
            `does not apply to its document (${asError(thrown).message}); the document is used without it`,
          );
        }
      }
      return this.options.decode(payload);
    } catch (thrown) {
      return this.setAside(`has an unexpected shape: ${asError(thrown).message}`);
    } finally {
      logger.debug({ path }, 'state loaded');
    }
  }

  /**
   * The journal's changes past the document's sequence number. A last line cut short is a write that
   * a kill interrupted before anyone heard of it, and is dropped; damage anywhere else sets the journal
   * aside from there, keeping the changes before it.
   */
  private async journalChanges(): Promise<unknown[]> {
    if (!this.options.replay) return [];
    let text: string;
    try {
      text = await readFile(this.journalPath, 'utf8');
    } catch (thrown) {
      if ((thrown as NodeJS.ErrnoException).code === 'ENOENT') return [];
      await this.setJournalAside(`cannot be read: ${asError(thrown).message}`);
      return [];
    }
    this.journalBytes = text.length;
    // Every complete line ends with a newline: what follows the last one is empty or cut short.
    const complete = text.split('\n').slice(0, -1);
    const changes: unknown[] = [];
    for (const [index, line] of complete.entries()) {
      let entry: { seq?: unknown; change?: unknown } | null;
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        await this.setJournalAside(`line ${index + 1} is not JSON; the ${index} lines before it are applied`);
        return changes;
      }
      if (
        typeof entry !== 'object' ||
        entry === null ||
        typeof entry.seq !== 'number' ||
        !('change' in entry)
      ) {
        await this.setJournalAside(
          `line ${index + 1} has no "seq" or "change"; the ${index} lines before it are applied`,
        );
        return changes;
      }
      if (entry.seq <= this.sequence) continue;
      this.sequence = entry.seq;
      changes.push(entry.change);
    }
    return changes;
  }

  /**
   * Writes the document `snapshot()` returns at write time; see the class comment for ordering. With
   * `change` (JSON text the document's `replay` understands), the write may be that change alone.
   */
  save(snapshot: () => T | JsonText, change?: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.latest = snapshot;
    return new Promise((resolve) => {
      this.waiters.push({ resolve, change });
      this.writing ??= this.drain();
    });
  }

  /**
   * Finishes the writes asked for so far and ignores later ones: after a stop, work still winding
   * down must not write into a state directory that its owner may be removing or handing on.
   */
  async close(): Promise<void> {
    this.closed = true;
    await this.writing;
  }

  /**
   * Writes until nobody waits. `writing` is cleared in the same synchronous step that finds the queue
   * empty: a caller resumed by the last batch may call `save` again at once, and must then start a new
   * drain rather than join one that has already finished (its promise would never resolve).
   */
  private async drain(): Promise<void> {
    try {
      while (this.waiters.length > 0) {
        const batch = this.waiters.splice(0);
        const snapshot = this.latest;
        const changes = batch.map((waiter) => waiter.change);
        if (snapshot) {
          if (this.journalTakes(changes)) await this.appendNow(changes as string[]);
          else await this.writeNow(snapshot);
        }
        for (const waiter of batch) waiter.resolve();
      }
    } finally {
      this.writing = undefined;
    }
  }

  private journalTakes(changes: (string | undefined)[]): changes is string[] {
    if (!this.options.replay || this.writeDocumentNext) return false;
    if (changes.some((change) => change === undefined)) return false;
    const least = this.options.minJournalBytes ?? MIN_JOURNAL_BYTES;
    return this.journalBytes < Math.max(least, this.documentBytes);
  }

  private async appendNow(changes: string[]): Promise<void> {
    const { logger } = this.options;
    let lines = '';
    for (const change of changes) lines += `{"seq":${++this.sequence},"change":${change}}\n`;
    try {
      const handle = await open(this.journalPath, 'a');
      try {
        await handle.writeFile(lines);
        await handle.sync();
      } finally {
        await handle.close();
      }
      this.journalBytes += lines.length;
    } catch (thrown) {
      // A line may be half written: the next write is the whole document, which replaces the journal.
      this.writeDocumentNext = true;
      logger.error(
        { path: this.journalPath, err: asError(thrown).message },
        'cannot write state; it will not survive a restart',
      );
    }
  }

  private async writeNow(snapshot: () => T | JsonText): Promise<void> {
    const { path, version, logger } = this.options;
    const temporary = `${path}.tmp-${process.pid}`;
    try {
      const data = snapshot();
      const text = data instanceof JsonText ? data.text : JSON.stringify(data);
      const journaled = this.options.replay ? `"journaled":${this.sequence},` : '';
      const document = `{"version":${version},${journaled}"data":${text}}\n`;
      await mkdir(dirname(path), { recursive: true });
      const handle = await open(temporary, 'w');
      try {
        await handle.writeFile(document);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, path);
      this.documentBytes = document.length;
      this.writeDocumentNext = false;
      if (this.options.replay) {
        await rm(this.journalPath, { force: true });
        this.journalBytes = 0;
      }
    } catch (thrown) {
      // Serving goes on without durability rather than stopping: the next write may well succeed
      // (a full disk freed), and a restart then loses only what changed in between.
      logger.error(
        { path, err: asError(thrown).message },
        'cannot write state; it will not survive a restart',
      );
      await rm(temporary, { force: true }).catch(() => undefined);
    }
  }

  private async setJournalAside(reason: string): Promise<void> {
    if (!this.options.replay) return;
    const journal = this.journalPath;
    const aside = `${journal}.set-aside-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    try {
      await rename(journal, aside);
    } catch (thrown) {
      if ((thrown as NodeJS.ErrnoException).code === 'ENOENT') return;
      // The next write of the document replaces it, as it replaces any journal it covers.
      this.options.logger.warn(
        { path: journal, err: asError(thrown).message },
        `state journal ${journal} ${reason}; it could not be moved aside, so it is ignored`,
      );
      return;
    }
    this.options.logger.warn(
      { path: journal, movedTo: aside },
      `state journal ${journal} ${reason}; moved it aside`,
    );
  }

  private async setAside(reason: string): Promise<undefined> {
    const { path, logger } = this.options;
    await this.setJournalAside('belongs to a document that was moved aside');
    const aside = `${path}.set-aside-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    try {
      await rename(path, aside);
      logger.warn(
        { path, movedTo: aside },
        `state file ${path} ${reason}; moved it aside and started without it`,
      );
    } catch (thrown) {
      logger.warn(
        { path, err: asError(thrown).message },
        `state file ${path} ${reason}; it could not be moved aside, so it is ignored`,
      );
    }
    return undefined;
  }

  /** Temporary files of writes cut short by a kill; the renamed document never depends on them. */
  private async removeTemporaryFiles(): Promise<void> {
    const prefix = `${basename(this.options.path)}.tmp-`;
    const dir = dirname(this.options.path);
    const entries = await readdir(dir).catch(() => [] as string[]);
    for (const entry of entries)
      if (entry.startsWith(prefix)) await rm(join(dir, entry), { force: true }).catch(() => undefined);
  }
}

/** Decoding helpers: each names what is wrong, since the message ends up in a warning. */
export function expectRecord(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${what} must be an object`);
  return value as Record<string, unknown>;
}

export function expectArray(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new Error(`${what} must be an array`);
  return value;
}

export function expectString(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '') throw new Error(`${what} must be a non-empty string`);
  return value;
}
