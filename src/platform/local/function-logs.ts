/**
 * The output of local runtime processes, kept per function in a bounded ring of lines so that logs can
 * be read after the fact and followed live, without files that grow forever.
 */

import type { FunctionLogReader, LogLine, LogReadOptions } from '../../core/logs.js';
import { objectKey } from '../../core/object-key.js';

export const LOG_LINES_PER_FUNCTION = 1000;
/** Longer lines are cut: one runaway line must not hold the whole buffer's memory. */
export const MAX_LINE_BYTES = 8 * 1024;

interface FunctionLog {
  lines: LogLine[];
  listeners: Set<(line: LogLine) => void>;
}

export class FunctionLogBuffer implements FunctionLogReader {
  private readonly logs = new Map<string, FunctionLog>();
  private readonly capacity: number;

  constructor(options: { linesPerFunction?: number } = {}) {
    this.capacity = options.linesPerFunction ?? LOG_LINES_PER_FUNCTION;
  }

  private logOf(namespace: string, name: string): FunctionLog {
    const key = objectKey(namespace, name);
    let log = this.logs.get(key);
    if (!log) {
      log = { lines: [], listeners: new Set() };
      this.logs.set(key, log);
    }
    return log;
  }

  /**
   * A writer for one process's stream: it joins chunks into whole lines (a chunk may end mid-line)
   * and flushes the rest when the process ends.
   */
  writer(
    namespace: string,
    name: string,
    instance: string,
    stream: 'stdout' | 'stderr',
  ): { write(text: string): void; end(): void } {
    let partial = '';
    const emit = (line: string) => this.append(namespace, name, { instance, stream, line });
    return {
      write: (text) => {
        const parts = (partial + text).split('\n');
        partial = parts.pop() ?? '';
        for (const line of parts) emit(line.replace(/\r$/, ''));
        if (partial.length > MAX_LINE_BYTES) {
          emit(partial);
          partial = '';
        }
      },
      end: () => {
        if (partial) emit(partial);
        partial = '';
      },
    };
  }

  private append(namespace: string, name: string, entry: Omit<LogLine, 'time'>): void {
    const log = this.logOf(namespace, name);
    const line: LogLine = {
      time: new Date().toISOString(),
      ...entry,
      line: entry.line.length > MAX_LINE_BYTES ? `${entry.line.slice(0, MAX_LINE_BYTES)}…` : entry.line,
    };
    log.lines.push(line);
    if (log.lines.length > this.capacity) log.lines.splice(0, log.lines.length - this.capacity);
    for (const listener of log.listeners) listener(line);
  }

  /** Drops a removed function's lines; a function of the same name starts a new log. */
  forget(namespace: string, name: string): void {
    this.logs.delete(objectKey(namespace, name));
  }

  async *read(namespace: string, name: string, options: LogReadOptions): AsyncIterable<LogLine> {
    const log = this.logOf(namespace, name);
    const queue: LogLine[] = options.tail > 0 ? log.lines.slice(-options.tail) : [];
    if (!options.follow) {
      yield* queue;
      return;
    }
    let wake: (() => void) | undefined;
    const listener = (line: LogLine) => {
      queue.push(line);
      wake?.();
    };
    const onAbort = () => wake?.();
    log.listeners.add(listener);
    options.signal.addEventListener('abort', onAbort);
    try {
      while (!options.signal.aborted) {
        const next = queue.shift();
        if (next) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
    } finally {
      log.listeners.delete(listener);
      options.signal.removeEventListener('abort', onAbort);
    }
  }
}
