/**
 * The local platform's InvocationStore: `state/invocations.json` in the state directory, on the same
 * journaled StateFile the other state uses, so each accepted invocation and each attempt is one
 * flushed journal line before its caller hears back, and a kill -9 loses none of them. Records are
 * held in memory too, for reads; they are replaced, never changed in place.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { InvocationStore } from '../../core/interfaces.js';
import {
  invocationKey,
  listRecords,
  recordOf,
  sweepableKeys,
  unfinishedRecords,
} from '../../core/invocation-records.js';
import type { InvocationRecord, InvocationState } from '../../core/invocations.js';
import { replayKeyedChanges, STATE_VERSION } from './local-state.js';
import { expectArray, expectRecord, expectString, JsonText, JsonTextCache, StateFile } from './state-file.js';

const keyOf = invocationKey;

function decodeRecord(value: unknown, what: string): InvocationRecord {
  const record = expectRecord(value, what);
  expectString(record.id, `${what}.id`);
  expectString(record.namespace, `${what}.namespace`);
  expectString(record.function, `${what}.function`);
  expectString(record.state, `${what}.state`);
  expectRecord(record.request, `${what}.request`);
  expectArray(record.attempts, `${what}.attempts`);
  if (typeof record.maxAttempts !== 'number') throw new Error(`${what}.maxAttempts must be a number`);
  return record as unknown as InvocationRecord;
}

function decodeInvocations(payload: unknown): Record<string, InvocationRecord> {
  const data = expectRecord(payload, 'data');
  const out: Record<string, InvocationRecord> = {};
  for (const [key, value] of Object.entries(data)) out[key] = decodeRecord(value, `data["${key}"]`);
  return out;
}

export class LocalInvocationStore implements InvocationStore {
  private readonly records: Map<string, InvocationRecord>;
  private readonly texts = new JsonTextCache();

  private constructor(
    private readonly file: StateFile<Record<string, InvocationRecord>>,
    initial: Record<string, InvocationRecord>,
  ) {
    this.records = new Map(Object.entries(initial));
  }

  static async open(stateDir: string, logger: Logger): Promise<LocalInvocationStore> {
    const file = new StateFile<Record<string, InvocationRecord>>({
      path: join(stateDir, 'state', 'invocations.json'),
      version: STATE_VERSION,
      logger,
      decode: decodeInvocations,
      replay: replayKeyedChanges,
    });
    return new LocalInvocationStore(file, (await file.load()) ?? {});
  }

  put(record: InvocationRecord): Promise<void> {
    const key = keyOf(record.namespace, record.id);
    this.records.set(key, structuredClone(record));
    this.texts.forget(key);
    return this.save(`{"put":${JSON.stringify(key)},"value":${this.texts.of(key, this.records.get(key))}}`);
  }

  async get(namespace: string, id: string): Promise<InvocationRecord | undefined> {
    return recordOf(this.records, namespace, id);
  }

  async list(
    namespace: string,
    options: { state?: InvocationState; limit?: number } = {},
  ): Promise<InvocationRecord[]> {
    return listRecords(this.records, namespace, options);
  }

  async unfinished(): Promise<InvocationRecord[]> {
    return unfinishedRecords(this.records);
  }

  async sweep(before: string): Promise<number> {
    const gone = sweepableKeys(this.records, before);
    if (gone.length === 0) return 0;
    for (const key of gone) {
      this.records.delete(key);
      this.texts.forget(key);
    }
    await Promise.all(gone.map((key) => this.save(`{"delete":${JSON.stringify(key)}}`)));
    return gone.length;
  }

  close(): Promise<void> {
    return this.file.close();
  }

  private save(change: string): Promise<void> {
    return this.file.save(() => new JsonText(this.texts.record(this.records)), change);
  }
}
