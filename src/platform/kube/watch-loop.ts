/**
 * List, then watch from the list's resourceVersion, for as long as the owner runs: when the server
 * ends the stream (its watch timeout, a 410) or the stream fails, the collection is listed again, so
 * what changed meanwhile is seen in the next list. For watchers that keep their own view of a
 * collection found by label (drift, build Jobs); the store has its own, per kind.
 */
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import type { KubeHttp } from './http.js';
import { type KubeObject, listObjects } from './objects.js';
import { collectionPath, labelSelector, type ResourceType } from './resource-types.js';
import { watchCollection } from './watch.js';

export interface WatchLoopOptions {
  http: KubeHttp;
  logger: Logger;
  type: ResourceType;
  /** All namespaces when undefined. */
  namespace: string | undefined;
  labels: Record<string, string>;
  /** Delay before a failed list or watch is tried again. */
  retryMs: number;
  /** The whole collection, at the start and after every re-list. */
  onList(items: readonly KubeObject[]): void;
  onEvent(phase: 'ADDED' | 'MODIFIED' | 'DELETED', object: KubeObject): void;
  /** What the log says failed. */
  what: string;
}

/** Runs until `signal` aborts. */
export async function runWatchLoop(options: WatchLoopOptions, signal: AbortSignal): Promise<void> {
  const { http, type, namespace, labels } = options;
  while (!signal.aborted) {
    try {
      const list = await listObjects<KubeObject>(http, type, { ...(namespace ? { namespace } : {}), labels });
      if (signal.aborted) return;
      options.onList(list.items);
      let failed: Error | undefined;
      await watchCollection(
        http,
        collectionPath(type, namespace),
        { resourceVersion: list.metadata.resourceVersion, labelSelector: labelSelector(labels) },
        (phase, object) => {
          if (phase === 'ERROR') failed = new Error(`watch of ${type.plural} ended with an error`);
          else if (phase !== 'BOOKMARK') options.onEvent(phase, object);
        },
        signal,
      );
      if (failed) throw failed;
    } catch (thrown) {
      if (signal.aborted) return;
      options.logger.warn(
        { watch: type.plural, err: asError(thrown).message },
        `${options.what} failed; re-listing`,
      );
      await new Promise((resolve) => setTimeout(resolve, options.retryMs));
    }
  }
}
