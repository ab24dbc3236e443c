/**
 * What every invocation store answers the same way from the records it holds in memory, keyed
 * `{namespace}/{id}`: one record by id, a namespace's records newest first, the unfinished ones, and
 * the finished ones old enough to sweep. Stores differ only in how they keep the records.
 */
import { FINAL_STATES, type InvocationRecord, type InvocationState } from './invocations.js';

export function invocationKey(namespace: string, id: string): string {
  return `${namespace}/${id}`;
}

/** A copy, so a caller that edits it changes nothing held. */
export function recordOf(
  records: ReadonlyMap<string, InvocationRecord>,
  namespace: string,
  id: string,
): InvocationRecord | undefined {
  const record = records.get(invocationKey(namespace, id));
  return record ? structuredClone(record) : undefined;
}

/** Newest first, in `state` when it is given, at most `limit`; copies. */
export function listRecords(
  records: ReadonlyMap<string, InvocationRecord>,
  namespace: string,
  options: { state?: InvocationState; limit?: number } = {},
): InvocationRecord[] {
  const found: InvocationRecord[] = [];
  for (const record of records.values())
    if (record.namespace === namespace && (options.state === undefined || record.state === options.state))
      found.push(record);
  found.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  return found.slice(0, options.limit ?? found.length).map((r) => structuredClone(r));
}

/** Not final yet, or final with a callback still to send: what a worker must take up again. */
export function unfinishedRecords(records: ReadonlyMap<string, InvocationRecord>): InvocationRecord[] {
  return [...records.values()]
    .filter((r) => !FINAL_STATES.has(r.state) || r.callback?.state === 'pending')
    .map((r) => structuredClone(r));
}

/**
 * The keys of records finished before `before` with nothing left to send. Dead letters stay: they
 * are kept until someone looks at them.
 */
export function sweepableKeys(records: ReadonlyMap<string, InvocationRecord>, before: string): string[] {
  const gone: string[] = [];
  for (const [key, record] of records)
    if (
      FINAL_STATES.has(record.state) &&
      record.state !== 'dead-lettered' &&
      record.callback?.state !== 'pending' &&
      record.updatedAt < before
    )
      gone.push(key);
  return gone;
}
