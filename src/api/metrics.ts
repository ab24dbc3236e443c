/**
 * Prometheus metrics. Each app gets its own Registry (no prom-client global state), so two systems in
 * one process, as in tests, never share or clash. The controller, builder and proxy report through
 * the plain methods below; none of them knows about Prometheus.
 */
import { Counter, Gauge, Histogram, type Metric, type MetricValueWithName, Registry } from 'prom-client';
import {
  PROXY_SECONDS_BUCKETS,
  ProxyTallies,
  type ProxyTally,
  type QueueDepth,
} from '../core/proxy-tallies.js';
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
  /**
   * Proxy counts kept elsewhere (the gateway thread's), fetched before each scrape so that /metrics
   * shows every request answered until then.
   */
  collectProxyTallies?: () => Promise<ProxyTally[]>;
  /** Each function's instances as its status reports them, read at scrape time. */
  functionInstances?: () => Promise<FunctionInstanceCount[]>;
}

export interface FunctionInstanceCount {
  namespace: string;
  function: string;
  desired: number;
  ready: number;
}

/**
 * A metric that prom-client's registry renders from numbers kept elsewhere. prom-client's Counter and
 * Histogram validate and hash their labels on every inc and observe, even through `labels()`, which
 * was a measurable share of a proxied request; the proxy's tallies cost a Map lookup and a few
 * additions per request and are turned into series only when scraped.
 */
class RenderedMetric {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly values: () => MetricValueWithName<string>[],
  ) {}

  async get() {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: this.values(),
    };
  }

  reset(): void {}
}

export class SlessMetrics {
  readonly registry = new Registry();
  private readonly options: MetricsOptions;
  private readonly syncs: Counter<'namespace' | 'source' | 'result'>;
  private readonly syncSeconds: Histogram<'namespace' | 'source' | 'result'>;
  private readonly buildsStarted: Counter<never>;
  private readonly builds: Counter<'result'>;
  private readonly buildSeconds: Histogram<'result'>;
  private readonly proxyTallies = new ProxyTallies();
  private readonly queueSources: Array<() => QueueDepth[] | Promise<QueueDepth[]>> = [];

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
    const functionInstances = options.functionInstances;
    new Gauge({
      name: 'sless_function_instances',
      help: 'Instances of each function: `desired` is what its scaling asks for, `ready` those that answer',
      labelNames: ['namespace', 'function', 'state'],
      registers,
      async collect() {
        if (!functionInstances) return;
        this.reset();
        for (const count of await functionInstances()) {
          const labels = { namespace: count.namespace, function: count.function };
          this.set({ ...labels, state: 'desired' }, count.desired);
          this.set({ ...labels, state: 'ready' }, count.ready);
        }
      },
    });
    // The registry's only contract with a metric: its name, and get() when scraped.
    const register = (metric: RenderedMetric) => this.registry.registerMetric(metric as unknown as Metric);
    register(
      new RenderedMetric(
        'sless_proxy_requests_total',
        'Requests proxied to functions, by function and status code',
        'counter',
        () => this.proxyRequestValues(),
      ),
    );
    register(
      new RenderedMetric(
        'sless_proxy_request_duration_seconds',
        'Time to response headers for proxied requests',
        'histogram',
        () => this.proxySecondsValues(),
      ),
    );
    // Registered after the proxy series, so /metrics keeps listing those first.
    const queueSources = this.queueSources;
    new Gauge({
      name: 'sless_proxy_queue_depth',
      help: "Requests waiting in the /fn/ proxy's admission queue, per function (spec.scale.concurrency)",
      labelNames: ['namespace', 'function'],
      registers,
      async collect() {
        this.reset();
        const totals = new Map<string, QueueDepth>();
        for (const depths of await Promise.all(queueSources.map((source) => source())))
          for (const d of depths) {
            const key = `${d.namespace}/${d.function}`;
            const known = totals.get(key);
            if (known) known.depth += d.depth;
            else totals.set(key, { ...d });
          }
        for (const d of totals.values()) this.set({ namespace: d.namespace, function: d.function }, d.depth);
      },
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

  /** Where queue depths are read when scraped: each proxy (a thread's, the main one's) adds its own. */
  addQueueDepths(source: () => QueueDepth[] | Promise<QueueDepth[]>): void {
    this.queueSources.push(source);
  }

  proxyResponse(namespace: string, name: string, statusCode: number, durationMs: number): void {
    const known = this.options.isKnownFunction?.(namespace, name) ?? true;
    this.proxyTallies.record(namespace, name, statusCode, durationMs, known);
  }

  private proxyRequestValues(): MetricValueWithName<string>[] {
    const values: MetricValueWithName<string>[] = [];
    for (const tally of this.proxyTallies.values())
      for (const [code, count] of tally.codes)
        values.push({
          labels: { namespace: tally.namespace, function: tally.function, code: String(code) },
          value: count,
        });
    return values;
  }

  /** prom-client's histogram layout: cumulative buckets with `le` first, then +Inf, sum and count. */
  private proxySecondsValues(): MetricValueWithName<string>[] {
    const name = 'sless_proxy_request_duration_seconds';
    const values: MetricValueWithName<string>[] = [];
    for (const tally of this.proxyTallies.values()) {
      const labels = { namespace: tally.namespace, function: tally.function };
      let cumulative = 0;
      PROXY_SECONDS_BUCKETS.forEach((le, i) => {
        cumulative += tally.buckets[i] as number;
        values.push({ metricName: `${name}_bucket`, labels: { le, ...labels }, value: cumulative });
      });
      values.push(
        { metricName: `${name}_bucket`, labels: { le: '+Inf', ...labels }, value: tally.count },
        { metricName: `${name}_sum`, labels, value: tally.sum },
        { metricName: `${name}_count`, labels, value: tally.count },
      );
    }
    return values;
  }

  contentType(): string {
    return this.registry.contentType;
  }

  async render(): Promise<string> {
    const collect = this.options.collectProxyTallies;
    if (collect) {
      const isKnown = this.options.isKnownFunction ?? (() => true);
      this.proxyTallies.merge(await collect(), isKnown);
    }
    return this.registry.metrics();
  }
}
