/**
 * Posts each source's commit status to its git host as the objects change: it follows the store
 * (both platforms' status writes come through it), decides the report (decide.ts), and posts only
 * what differs from the last post for that source. Posting never blocks anything: it runs beside
 * the reconciles, retries a failed post with exponential backoff, and a newer report replaces one
 * still waiting. The token goes into the request's header only; logs name the source, the commit,
 * the state and the host's answer code, never a header.
 */

import type { Logger } from 'pino';
import { asError } from '../core/errors.js';
import type { ObjectStore, StoreEvent } from '../core/interfaces.js';
import { objectKey } from '../core/object-key.js';
import { type GitSource, LABEL_SOURCE, type SlessFunction } from '../core/resources.js';
import { type CommitReport, decideReport } from './decide.js';
import { type CommitStatusSpec, statusRequest } from './providers.js';

/** How a post reaches the host: one HTTP request, the answer's status code back. */
export type StatusSender = (request: {
  url: string;
  headers: Record<string, string>;
  body: string;
}) => Promise<number>;

export interface CommitStatusReporterOptions {
  store: ObjectStore;
  send: StatusSender;
  /** The token for a source's API calls: its secretRef's password or token; undefined: none. */
  token(source: GitSource): Promise<string | undefined>;
  logger: Logger;
  /** sless's external URL: a report for several functions links to the dashboard there. */
  externalUrl?: string;
  /** First retry delay; doubled each time up to `maxDelayMs`. */
  retryDelayMs?: number;
  maxDelayMs?: number;
  /** Attempts per report before it is given up (a newer report starts again). */
  maxAttempts?: number;
  /** Objects settle in bursts (a sync applies many): a source is decided this long after its last change. */
  settleMs?: number;
}

interface Pending {
  report: CommitReport;
  attempt: number;
  timer?: NodeJS.Timeout;
}

export function commitStatusOf(source: GitSource): CommitStatusSpec | undefined {
  return (source.spec as { commitStatus?: CommitStatusSpec }).commitStatus;
}

export class CommitStatusReporter {
  private readonly options: CommitStatusReporterOptions;
  private unsubscribe: (() => void) | undefined;
  private readonly settling = new Map<string, NodeJS.Timeout>();
  /** What was last posted (or is being posted) per source, to post each change once. */
  private readonly last = new Map<string, string>();
  private readonly pending = new Map<string, Pending>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(options: CommitStatusReporterOptions) {
    this.options = options;
  }

  start(): void {
    this.stopped = false;
    this.unsubscribe = this.options.store.subscribe((event) => this.onEvent(event));
  }

  /** Stops deciding and retrying; resolves once no post is in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    for (const timer of this.settling.values()) clearTimeout(timer);
    this.settling.clear();
    for (const entry of this.pending.values()) clearTimeout(entry.timer);
    this.pending.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  private onEvent(event: StoreEvent): void {
    const object = event.object;
    let sourceName: string | undefined;
    if (object.kind === 'GitSource') sourceName = object.metadata.name;
    else if (object.kind === 'Function') sourceName = object.metadata.labels?.[LABEL_SOURCE];
    if (!sourceName) return;
    const key = objectKey(object.metadata.namespace, sourceName);
    clearTimeout(this.settling.get(key));
    const timer = setTimeout(() => {
      this.settling.delete(key);
      void this.decide(object.metadata.namespace, sourceName).catch((error: unknown) =>
        this.options.logger.warn(
          { source: key, err: asError(error).message },
          'commit status: cannot decide',
        ),
      );
    }, this.options.settleMs ?? 100);
    timer.unref();
    this.settling.set(key, timer);
  }

  private async decide(namespace: string, name: string): Promise<void> {
    if (this.stopped) return;
    const source = await this.options.store.get('GitSource', namespace, name);
    if (!source || !commitStatusOf(source)) return;
    const functions = (await this.options.store.list('Function', { namespace })) as SlessFunction[];
    const dashboard = this.options.externalUrl
      ? `${this.options.externalUrl}/ui/#ns=${encodeURIComponent(namespace)}`
      : undefined;
    const report = decideReport(source, functions, dashboard);
    if (!report) return;
    const key = objectKey(namespace, name);
    const fingerprint = JSON.stringify(report);
    if (this.last.get(key) === fingerprint) return;
    this.last.set(key, fingerprint);
    // A newer report replaces one still waiting for its retry.
    clearTimeout(this.pending.get(key)?.timer);
    const entry: Pending = { report, attempt: 0 };
    this.pending.set(key, entry);
    this.attempt(key, source, entry);
  }

  private attempt(key: string, source: GitSource, entry: Pending): void {
    if (this.stopped || this.pending.get(key) !== entry) return;
    entry.attempt += 1;
    const run = this.post(source, entry.report).then(
      (outcome) => {
        if (this.pending.get(key) !== entry) return;
        if (outcome === 'done' || outcome === 'refused') {
          this.pending.delete(key);
          return;
        }
        const max = this.options.maxAttempts ?? 8;
        if (entry.attempt >= max) {
          this.pending.delete(key);
          // The next change of the source tries again.
          this.last.delete(key);
          this.options.logger.warn(
            {
              source: key,
              commit: entry.report.commit.slice(0, 12),
              state: entry.report.state,
              attempts: entry.attempt,
            },
            'commit status: given up after retries',
          );
          return;
        }
        const base = this.options.retryDelayMs ?? 1000;
        const delay = Math.min(base * 2 ** (entry.attempt - 1), this.options.maxDelayMs ?? 60_000);
        entry.timer = setTimeout(() => this.attempt(key, source, entry), delay);
        entry.timer.unref();
      },
      () => undefined,
    );
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  /** One post: `done`, `retry` (unreachable, 5xx, 429) or `refused` (any other 4xx: retrying won't help). */
  private async post(source: GitSource, report: CommitReport): Promise<'done' | 'retry' | 'refused'> {
    const spec = commitStatusOf(source);
    const log = {
      source: objectKey(source.metadata.namespace, source.metadata.name),
      commit: report.commit.slice(0, 12),
      state: report.state,
    };
    if (!spec) return 'refused';
    let token: string | undefined;
    try {
      token = await this.options.token(source);
    } catch (error) {
      this.options.logger.warn({ ...log, err: asError(error).message }, 'commit status: no credential');
      return 'retry';
    }
    if (!token) {
      this.options.logger.warn(log, 'commit status: the source has no secretRef token to post with');
      return 'refused';
    }
    let request: ReturnType<typeof statusRequest>;
    try {
      request = statusRequest(spec, source.spec.url, report, token);
    } catch (error) {
      this.options.logger.warn({ ...log, err: asError(error).message }, 'commit status: cannot post');
      return 'refused';
    }
    let code: number;
    try {
      code = await this.options.send(request);
    } catch (error) {
      // The error's message names the address at most; the request (and its header) is not logged.
      this.options.logger.info(
        { ...log, err: asError(error).message },
        'commit status: host unreachable; retrying',
      );
      return 'retry';
    }
    if (code >= 200 && code < 300) {
      this.options.logger.info({ ...log, code }, 'commit status posted');
      return 'done';
    }
    if (code >= 500 || code === 429 || code === 408) {
      this.options.logger.info({ ...log, code }, 'commit status: host failed; retrying');
      return 'retry';
    }
    this.options.logger.warn({ ...log, code }, 'commit status refused by the host');
    return 'refused';
  }
}
