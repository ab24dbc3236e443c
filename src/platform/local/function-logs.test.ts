/**
 * FunctionLogBuffer: chunks joined into lines per stream with the last partial line flushed at the end,
 * a bounded number of lines per function, runaway lines cut, and a follow that gives the tail and then
 * new lines until aborted.
 */
import { describe, expect, it } from 'vitest';
import type { LogLine } from '../../core/logs.js';
import { FunctionLogBuffer, MAX_LINE_BYTES } from './function-logs.js';

async function collect(lines: AsyncIterable<LogLine>): Promise<string[]> {
  const out: string[] = [];
  for await (const l of lines) out.push(`${l.instance} ${l.stream} ${l.line}`);
  return out;
}

const read = (buffer: FunctionLogBuffer, tail: number) =>
  collect(buffer.read('ns', 'f', { tail, follow: false, signal: new AbortController().signal }));

describe('FunctionLogBuffer', () => {
  it('joins chunks into lines per stream and flushes the last partial line at the end', async () => {
    const buffer = new FunctionLogBuffer();
    const out = buffer.writer('ns', 'f', 'f-r1', 'stdout');
    const err = buffer.writer('ns', 'f', 'f-r1', 'stderr');
    out.write('hel');
    err.write('oops\r\nbad');
    out.write('lo\nwor');
    out.write('ld\n');
    out.write('tail');
    out.end();
    err.end();
    expect(await read(buffer, 100)).toEqual([
      'f-r1 stderr oops',
      'f-r1 stdout hello',
      'f-r1 stdout world',
      'f-r1 stdout tail',
      'f-r1 stderr bad',
    ]);
    expect(await read(buffer, 2)).toEqual(['f-r1 stdout tail', 'f-r1 stderr bad']);
    expect(await read(buffer, 0)).toEqual([]);
  });

  it('keeps a bounded number of lines per function and cuts runaway lines', async () => {
    const buffer = new FunctionLogBuffer({ linesPerFunction: 3 });
    const out = buffer.writer('ns', 'f', 'i', 'stdout');
    for (let i = 1; i <= 10; i++) out.write(`line ${i}\n`);
    expect(await read(buffer, 100)).toEqual(['i stdout line 8', 'i stdout line 9', 'i stdout line 10']);
    out.write('x'.repeat(MAX_LINE_BYTES * 3));
    const [last] = await read(buffer, 1);
    expect(last).toBe(`i stdout ${'x'.repeat(MAX_LINE_BYTES)}…`);
    // Other functions have their own lines.
    const other = await collect(
      buffer.read('ns', 'g', { tail: 10, follow: false, signal: new AbortController().signal }),
    );
    expect(other).toEqual([]);
  });

  it('follows: the tail, then new lines as they are written, until aborted', async () => {
    const buffer = new FunctionLogBuffer();
    const out = buffer.writer('ns', 'f', 'i', 'stdout');
    out.write('old 1\nold 2\n');
    const stop = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const l of buffer.read('ns', 'f', { tail: 1, follow: true, signal: stop.signal })) {
        seen.push(l.line);
        if (l.line === 'new 2') stop.abort();
      }
    })();
    out.write('new 1\n');
    await new Promise((r) => setImmediate(r));
    out.write('new 2\nnew 3\n');
    await reading;
    expect(seen).toEqual(['old 2', 'new 1', 'new 2']);
  });
});
