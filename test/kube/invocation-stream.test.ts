/**
 * The kube invocation store (StreamInvocationStore) against a real RabbitMQ (Debian's
 * rabbitmq-server), one replica reaching it through a TCP gate the test cuts: `open` keeps trying
 * while the broker resets and then refuses connections, and reads what the stream holds once it
 * accepts; a replica cut off while another writes resumes its tail at the offset after the last it
 * read, so every entry written meanwhile reaches its index and none is skipped; a write made while
 * the broker cannot be reached lands once the connection is back.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { InvocationRecord, InvocationState } from '../../src/core/invocations.js';
import { StreamInvocationStore } from '../../src/platform/kube/invocation-store.js';
import { pollUntil } from '../helpers/poll-until.js';
import { type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';

/** A logger whose warnings the test reads: the store says there when it tries again. */
function recordingLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, sink), lines };
}

const eventually = (what: string, check: () => Promise<boolean>) => pollUntil(what, check, 60_000, 50);

function record(id: string, state: InvocationState): InvocationRecord {
  const at = new Date().toISOString();
  return {
    id,
    namespace: 'ns',
    function: 'fn',
    state,
    createdAt: at,
    updatedAt: at,
    request: { method: 'POST', path: '/', headers: [], body: '' },
    maxAttempts: 3,
    backoffMs: 10,
    attempts: [],
  };
}

describe('the invocation stream store against a real RabbitMQ, across cut connections', {
  timeout: 180_000,
}, () => {
  let broker: RabbitMq;
  const opened: StreamInvocationStore[] = [];
  const gates: TcpGate[] = [];

  beforeAll(async () => {
    broker = await startRabbitMq();
  });
  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
    for (const gate of gates.splice(0)) await gate.close();
  });
  afterAll(async () => {
    await broker?.stop();
  });

  const open = async (stream: string, port: number, logger = recordingLogger().logger) => {
    const store = await StreamInvocationStore.open({
      url: `amqp://guest:guest@127.0.0.1:${port}/`,
      stream,
      logger,
      openTimeoutMs: 90_000,
    });
    opened.push(store);
    return store;
  };
  const gate = async (mode: 'relay' | 'reset' | 'refuse') => {
    const g = await startTcpGate({ host: '127.0.0.1', port: broker.port }, mode);
    gates.push(g);
    return g;
  };

  it('open keeps trying while the broker resets and then refuses connections, and reads the stream once it accepts', async () => {
    const stream = `s.open.${randomUUID()}`;
    const writer = await open(stream, broker.port);
    await writer.put(record('before', 'succeeded'));
    const g = await gate('reset');
    const { logger, lines } = recordingLogger();
    let settled = false;
    const opening = open(stream, g.port, logger).finally(() => {
      settled = true;
    });
    await eventually('two connections reset', async () => g.resets() >= 2);
    await g.set('refuse');
    await eventually('a refused connection tried again', async () =>
      lines.some((line) => line.includes('ECONNREFUSED') && line.includes('trying again')),
    );
    expect(settled).toBe(false);
    await g.set('relay');
    const reader = await opening;
    expect((await reader.get('ns', 'before'))?.state).toBe('succeeded');
    expect(reader.size()).toBe(1);
  });

  it('a replica cut off while another writes resumes at the next offset: it reads every entry written meanwhile', async () => {
    const stream = `s.resume.${randomUUID()}`;
    const writer = await open(stream, broker.port);
    const g = await gate('relay');
    const { logger, lines } = recordingLogger();
    const reader = await open(stream, g.port, logger);
    await writer.put(record('a', 'queued'));
    await reader.caughtUp();
    expect((await reader.get('ns', 'a'))?.state).toBe('queued');
    await g.set('refuse');
    await eventually('the reader lost its connection', async () =>
      lines.some((line) => line.includes('closed; reconnecting')),
    );
    // Written while the reader cannot see the stream: the first of them directly after what it read.
    await writer.put(record('a', 'succeeded'));
    await writer.put(record('b', 'queued'));
    await writer.put(record('c', 'dead-lettered'));
    await g.set('relay');
    // A mark written after all of them, read back: the tail is past them.
    await reader.caughtUp();
    expect((await reader.get('ns', 'a'))?.state).toBe('succeeded');
    expect((await reader.get('ns', 'b'))?.state).toBe('queued');
    expect((await reader.get('ns', 'c'))?.state).toBe('dead-lettered');
    expect(reader.size()).toBe(3);
    expect(await reader.list('ns')).toEqual(await writer.list('ns'));
  });

  it('a write made while the broker cannot be reached lands once the connection is back', async () => {
    const stream = `s.write.${randomUUID()}`;
    const g = await gate('relay');
    const { logger, lines } = recordingLogger();
    const replica = await open(stream, g.port, logger);
    await g.set('refuse');
    await eventually('the replica lost its connection', async () =>
      lines.some((line) => line.includes('closed; reconnecting')),
    );
    let settled = false;
    const writing = replica.put(record('late', 'queued')).finally(() => {
      settled = true;
    });
    await eventually('the write tried again', async () =>
      lines.some((line) => line.includes('(write); trying again')),
    );
    expect(settled).toBe(false);
    await g.set('relay');
    await writing;
    const other = await open(stream, broker.port);
    expect((await other.get('ns', 'late'))?.state).toBe('queued');
    expect(other.size()).toBe(1);
  });
});
