/**
 * Prometheus metrics. Each app gets its own Registry (no prom-client global state), so two systems in
 * one process, as in tests, never share or clash. The controller, builder and proxy report through
 * the plain methods below; none of them knows about Prometheus.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BuildRecord, GitSource, SlessFunction } from '../core/resources.js';
import type { SyncResult } from '../reconcile/source-sync.js';

export interface MetricsOptions {
  /** Ready functions per namespace, read at scrape time so the gauge can never drift. */
  readyFunctions?: () => Promise<Map<string, number>>;
  /**
   * Whether a proxied name is a real function. Unknown names share one label value, so a scan of
   * random `/fn/…` paths cannot grow the series without bound.
   */
  isKnownFunction?: (namespace: string, name: string) => boolean;
}

const UNKNOWN = '_unknown';

export class SlessMetrics {
  readonly registry = new Registry();
  private readonly options: MetricsOptions;
  private readonly syncs: Counter<'namespace' | 'source' | 'result'>;
  private readonly syncSeconds: Histogram<'namespace' | 'source' | 'result'>;
  private readonly buildsStarted: Counter<never>;
  private readonly builds: Counter<'result'>;
  private readonly buildSeconds: Histogram<'result'>;
  private readonly proxyRequests: Counter<'namespace' | 'function' | 'code'>;
  private readonly proxySeconds: Histogram<'namespace' | 'function'>;
  /**
   * Label lookups validate and hash the labels on every call, a measurable share of a proxied
   * request; each series is looked up once. Bounded: unknown names share one key per status code.
   */
  private readonly proxySeries = new Map<
    string,
    {
      requests: ReturnType<Counter<'namespace' | 'function' | 'code'>['labels']>;
      seconds: ReturnType<Histogram<'namespace' | 'function'>['labels']>;
    }
  >();

  constructor(options: MetricsOptions = {}) {
    this.options = options;
    const registers = [this.registry];
    this.syncs = new Counter({
      name: 'sless_source_syncs_total',
      help: 'GitSource syncs by source and result (synced, unchanged, invalid, failed, suspended)',
      labelNames: ['namespace', 'source', 'result'],
      registers,
    });
    this.syncSeconds = new Histogram({
      name: 'sless_source_sync_duration_seconds',
      help: 'Duration of GitSource syncs',
      labelNames: ['namespace', 'source', 'result'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.buildsStarted = new Counter({
      name: 'sless_builds_started_total',
      help: 'Builds started',
      registers,
    });
    this.builds = new Counter({
      name: 'sless_builds_total',
      help: 'Finished builds by result',
      labelNames: ['result'],
      registers,
    });
    this.buildSeconds = new Histogram({
      name: 'sless_build_duration_seconds',
      help: 'Duration of finished builds',
      labelNames: ['result'],
      buckets: [1, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    const readyFunctions = options.readyFunctions;
    new Gauge({
      name: 'sless_functions_ready',
      help: 'Functions in phase Ready, per namespace',
      labelNames: ['namespace'],
      registers,
      async collect() {
        if (!readyFunctions) return;
        this.reset();
        for (const [namespace, count] of await readyFunctions()) this.set({ namespace }, count);
      },
    });
    this.proxyRequests = new Counter({
      name: 'sless_proxy_requests_total',
      help: 'Requests proxied to functions, by function and status code',
      labelNames: ['namespace', 'function', 'code'],
      registers,
    });
    this.proxySeconds = new Histogram({
      name: 'sless_proxy_request_duration_seconds',
      help: 'Time to response headers for proxied requests',
      labelNames: ['namespace', 'function'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
  }

  syncFinished(source: GitSource, result: SyncResult, durationMs: number): void {
    const labels = {
      namespace: source.metadata.namespace,
      source: source.metadata.name,
      result: result.outcome,
    };
    this.syncs.inc(labels);
    this.syncSeconds.observe(labels, durationMs / 1000);
  }

  buildStarted(_fn: SlessFunction): void {
    this.buildsStarted.inc();
  }

  buildFinished(record: BuildRecord): void {
    const result = record.result.toLowerCase();
    this.builds.inc({ result });
    if (record.durationMs !== undefined) this.buildSeconds.observe({ result }, record.durationMs / 1000);
  }

  proxyResponse(namespace: string, name: string, statusCode: number, durationMs: number): void {
    const known = this.options.isKnownFunction?.(namespace, name) ?? true;
    const key = known ? `${namespace}/${name}/${statusCode}` : `${UNKNOWN}/${statusCode}`;
    let series = this.proxySeries.get(key);
    if (!series) {
      const labels = known ? { namespace, function: name } : { namespace: UNKNOWN, function: UNKNOWN };
      series = {
        requests: this.proxyRequests.labels({ ...labels, code: String(statusCode) }),
        seconds: this.proxySeconds.labels(labels),
      };
      this.proxySeries.set(key, series);
    }
    series.requests.inc();
    series.seconds.observe(durationMs / 1000);
  }

  contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
