/**
 * Function logs on kube: `pods/log` of every pod of the function's Deployment (all replicas), each
 * line tagged with its pod name. Without follow, pods are read one after the other in name order
 * (as `kubectl logs -l … --prefix`); with follow, their streams are merged as lines arrive.
 */
import { createInterface } from 'node:readline';
import { SlessError } from '../../core/errors.js';
import type { FunctionLogReader, LogLine, LogReadOptions } from '../../core/logs.js';
import type { KubeHttp } from './http.js';
import { KubeApiError } from './http.js';
import { LABEL_COMPONENT, LABEL_FUNCTION } from './labels.js';
import { type KubeObject, listObjects } from './objects.js';
import { POD } from './resource-types.js';

const CONTAINER = 'function';
/** `timestamps=true` puts an RFC 3339 time and one space before each line. */
const TIMESTAMPED = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (.*)$/;

export function parseLogLine(instance: string, raw: string): LogLine {
  const match = TIMESTAMPED.exec(raw);
  return match
    ? { time: match[1] as string, instance, stream: 'output', line: match[2] as string }
    : { time: new Date().toISOString(), instance, stream: 'output', line: raw };
}

export class KubeFunctionLogs implements FunctionLogReader {
  private readonly http: KubeHttp;

  constructor(options: { http: KubeHttp }) {
    this.http = options.http;
  }

  /** The function's pods, by name. */
  async pods(namespace: string, name: string): Promise<string[]> {
    const list = await listObjects<KubeObject>(this.http, POD, {
      namespace,
      labels: { [LABEL_FUNCTION]: name, [LABEL_COMPONENT]: 'function' },
    });
    return list.items.map((p) => p.metadata.name).sort();
  }

  async *read(namespace: string, name: string, options: LogReadOptions): AsyncIterable<LogLine> {
    const pods = await this.pods(namespace, name);
    if (!options.follow) {
      for (const pod of pods) yield* this.podLines(namespace, pod, options);
      return;
    }
    yield* merge(
      pods.map((pod) => this.podLines(namespace, pod, options)),
      options.signal,
    );
  }

  private async *podLines(namespace: string, pod: string, options: LogReadOptions): AsyncIterable<LogLine> {
    let response: Awaited<ReturnType<KubeHttp['stream']>>;
    try {
      response = await this.http.stream(
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/log`,
        {
          query: { container: CONTAINER, tailLines: options.tail, timestamps: true, follow: options.follow },
          accept: '*/*',
          signal: options.signal,
        },
      );
    } catch (error) {
      if (options.signal.aborted) return;
      // One replica that cannot give logs (its node unreachable, its container not started) is said
      // so in the stream, under its name, instead of hiding the other replicas' lines.
      if (error instanceof KubeApiError) {
        yield {
          time: new Date().toISOString(),
          instance: pod,
          stream: 'output',
          line: `[sless] ${podMessage(error)}`,
        };
        return;
      }
      throw new SlessError(`cannot read the logs of pod ${pod}: ${(error as Error).message}`, {
        reason: 'LogsUnavailable',
      });
    }
    const lines = createInterface({ input: response, crlfDelay: Number.POSITIVE_INFINITY });
    try {
      for await (const raw of lines) yield parseLogLine(pod, raw);
    } catch (error) {
      if (!options.signal.aborted) throw error;
    } finally {
      lines.close();
      response.destroy();
    }
  }
}

/** The API server's own words, without the `GET /api/v1/...: 400` prefix. */
function podMessage(error: KubeApiError): string {
  return error.message.replace(/^GET \S+: \d+ /, '');
}

/** Interleaves several line streams as lines arrive; ends when all end or the signal aborts. */
async function* merge(sources: AsyncIterable<LogLine>[], signal: AbortSignal): AsyncIterable<LogLine> {
  const queue: LogLine[] = [];
  let running = sources.length;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = () => wake?.();
  for (const source of sources) {
    void (async () => {
      try {
        for await (const line of source) {
          queue.push(line);
          notify();
        }
      } catch (error) {
        failure ??= error;
      } finally {
        running--;
        notify();
      }
    })();
  }
  signal.addEventListener('abort', notify);
  try {
    for (;;) {
      const next = queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (failure) throw failure;
      if (running === 0 || signal.aborted) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', notify);
  }
}
