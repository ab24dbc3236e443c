/**
 * One watch request: `GET {collection}?watch=true`, one JSON event per line, until the API server ends
 * the stream. What client-node's Watch does, over KubeHttp, so that watching does not load client-node
 * (see kubeconfig.ts for what that costs).
 */
import { createInterface } from 'node:readline';
import type { KubeHttp } from './http.js';
import type { KubeObject } from './objects.js';

/** ADDED, MODIFIED, DELETED, BOOKMARK, or ERROR (then `object` is a Status, e.g. code 410). */
export type WatchPhase = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

/**
 * Resolves when the server ends the stream or `signal` aborts it; rejects when the request fails (a
 * non-2xx answer as KubeApiError, a connection reset mid-stream). Events reach `onEvent` in order.
 */
export async function watchCollection(
  http: KubeHttp,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  onEvent: (phase: WatchPhase, object: KubeObject) => void,
  signal: AbortSignal,
  /** Another representation, e.g. metadata only (PartialObjectMetadata). */
  accept?: string,
): Promise<void> {
  if (signal.aborted) return;
  let response: Awaited<ReturnType<KubeHttp['stream']>>;
  try {
    response = await http.stream(path, {
      query: { ...query, watch: true },
      signal,
      ...(accept ? { accept } : {}),
    });
  } catch (error) {
    if (signal.aborted) return;
    throw error;
  }
  // A peer that vanished without a FIN is noticed by TCP keep-alive probes, as client-node's Watch does.
  response.socket?.setKeepAlive(true, 30_000);
  await new Promise<void>((resolve, reject) => {
    const lines = createInterface({ input: response, crlfDelay: Number.POSITIVE_INFINITY });
    lines.on('line', (line) => {
      if (!line) return;
      let event: { type?: WatchPhase; object?: KubeObject };
      try {
        event = JSON.parse(line) as typeof event;
      } catch {
        // Not an event (a proxy's noise): skipped, as client-node skips it.
        return;
      }
      if (event.type && event.object) onEvent(event.type, event.object);
    });
    // The server ending the stream (its watch timeout) is the normal end; the caller watches again.
    lines.on('close', () => resolve());
    response.on('close', () => resolve());
    // readline passes its input's errors on: both must be heard, or a reset is an uncaught error.
    const failed = (error: Error) => {
      if (signal.aborted) resolve();
      else reject(error);
    };
    response.on('error', failed);
    lines.on('error', failed);
  });
}
