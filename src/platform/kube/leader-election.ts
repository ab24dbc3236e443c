/**
 * Leader election on a coordination.k8s.io/v1 Lease, following client-go's leaderelection package
 * (@kubernetes/client-node 1.4 ships none): every retry period each candidate reads the Lease; the
 * holder renews it, and another candidate takes it only when the record it observed has not changed
 * for a whole lease duration (measured on its own clock, so clock skew between replicas does not
 * matter). Writes carry the resourceVersion read, so two candidates racing for the same Lease cannot
 * both win: the API server refuses the second with 409. A leader that cannot renew within the renew
 * deadline stops leading before anyone else may take over (deadline < duration). Stopping releases
 * the Lease (holder cleared, duration 1 s), so a replica shut down on purpose hands over at once.
 */
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import {
  DEFAULT_LEADER_TIMING,
  type LeaderElectionTiming,
  type LeaderInfo,
  type Leadership,
} from '../../core/leadership.js';
import { isStatus, type KubeHttp } from './http.js';
import { getObject, type KubeObject } from './objects.js';
import { collectionPath, objectPath, type ResourceType } from './resource-types.js';

export const LEASE: ResourceType = {
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  plural: 'leases',
  namespaced: true,
};

/** Where the leader can be reached, so followers can hand it what only the leader does. */
export const ANNOTATION_LEADER_URL = 'sless.dev/leader-url';

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface LeaseObject extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectorOptions {
  http: KubeHttp;
  logger: Logger;
  namespace: string;
  name: string;
  identity: string;
  /** Advertised on the Lease while this replica leads (ANNOTATION_LEADER_URL). */
  url?: string;
  timing?: Partial<LeaderElectionTiming>;
  onStartedLeading(): void;
  onStoppedLeading(): void;
}

/** MicroTime: the API server parses exactly six fractional digits. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector implements Leadership {
  private readonly options: LeaderElectorOptions;
  private readonly timing: LeaderElectionTiming;
  private leading = false;
  /** The record last read or written, the local time it last changed, and the leader's address. */
  private observed: { spec: string; at: number; holder: string | undefined; url: string | undefined } = {
    spec: '',
    at: 0,
    holder: undefined,
    url: undefined,
  };
  private lastRenew = 0;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.options = options;
    this.timing = { ...DEFAULT_LEADER_TIMING, ...options.timing };
    if (this.timing.renewDeadlineMs >= this.timing.leaseDurationMs)
      throw new Error('leader election: the renew deadline must be shorter than the lease duration');
  }

  isLeader(): boolean {
    return this.leading;
  }

  info(): LeaderInfo {
    return { identity: this.options.identity, holder: this.observed.holder, isLeader: this.leading };
  }

  /** The leader's advertised URL, as last observed; undefined while nobody leads. */
  leaderUrl(): string | undefined {
    return this.leading ? this.options.url : this.observed.url;
  }

  /** Tries once at once (so a lone replica leads before it resolves), then every retry period. */
  async start(): Promise<void> {
    await this.attempt();
    this.schedule();
  }

  /** Stops campaigning; a leader releases the Lease so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.loop;
    this.lose('shutting down');
    // Released even when an attempt won the Lease just as we stopped (release checks the holder).
    await this.release().catch((error: unknown) =>
      this.options.logger.warn({ err: asError(error).message }, 'could not release the leader lease'),
    );
  }

  private schedule(): void {
    if (this.stopped) return;
    // Followers jitter their retries (client-go: up to 1.2×) so candidates do not march in step.
    const jitter = this.leading ? 1 : 1 + Math.random() * 0.2;
    this.timer = setTimeout(() => {
      this.loop = this.attempt().finally(() => this.schedule());
    }, this.timing.retryPeriodMs * jitter);
  }

  private async attempt(): Promise<void> {
    let acquired = false;
    try {
      acquired = await this.tryAcquireOrRenew();
    } catch (error) {
      this.options.logger.warn({ err: asError(error).message }, 'leader election: cannot reach the lease');
    }
    if (this.stopped) return;
    if (acquired) {
      this.lastRenew = Date.now();
      this.armDeadline();
      if (!this.leading) {
        this.leading = true;
        this.options.logger.info({ identity: this.options.identity }, 'became the leader');
        this.options.onStartedLeading();
      }
    } else if (this.leading && this.observed.holder !== this.options.identity) {
      this.lose(`the lease is held by ${this.observed.holder ?? 'nobody'}`);
    }
  }

  /**
   * Leading ends when no renewal succeeded within the renew deadline, checked by a timer rather than
   * after each attempt: a request hanging on a dead connection must not keep a deposed leader working.
   */
  private armDeadline(): void {
    clearTimeout(this.deadline);
    this.deadline = setTimeout(() => {
      if (this.leading && Date.now() - this.lastRenew >= this.timing.renewDeadlineMs)
        this.lose(`no renewal for ${this.timing.renewDeadlineMs} ms`);
    }, this.timing.renewDeadlineMs);
    this.deadline.unref();
  }

  private lose(why: string): void {
    clearTimeout(this.deadline);
    if (!this.leading) return;
    this.leading = false;
    this.options.logger.warn({ identity: this.options.identity, why }, 'stopped leading');
    this.options.onStoppedLeading();
  }

  private path(): string {
    return objectPath(LEASE, this.options.namespace, this.options.name);
  }

  private observe(lease: LeaseObject): void {
    const spec = JSON.stringify(lease.spec ?? {});
    if (spec !== this.observed.spec) {
      this.observed = {
        spec,
        at: Date.now(),
        holder: lease.spec?.holderIdentity || undefined,
        url: lease.metadata.annotations?.[ANNOTATION_LEADER_URL] || undefined,
      };
    }
  }

  private annotations(): Record<string, string> {
    return this.options.url ? { [ANNOTATION_LEADER_URL]: this.options.url } : {};
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = Date.now();
    const { identity, namespace, name, http } = this.options;
    const durationSeconds = Math.ceil(this.timing.leaseDurationMs / 1000);
    const current = await getObject<LeaseObject>(http, LEASE, namespace, name);
    if (!current) {
      const spec: LeaseSpec = {
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        acquireTime: microTime(now),
        renewTime: microTime(now),
        leaseTransitions: 0,
      };
      try {
        const created = await http.request<LeaseObject>('POST', collectionPath(LEASE, namespace), {
          body: {
            apiVersion: LEASE.apiVersion,
            kind: LEASE.kind,
            metadata: { name, namespace, annotations: this.annotations() },
            spec,
          },
        });
        this.observe(created);
        return true;
      } catch (error) {
        if (isStatus(error, 409)) return false;
        throw error;
      }
    }
    this.observe(current);
    const spec = current.spec ?? {};
    const holder = spec.holderIdentity || undefined;
    const validForMs = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder && holder !== identity && this.observed.at + validForMs > now) return false;
    const ours = holder === identity;
    const next: LeaseSpec = {
      holderIdentity: identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: ours && spec.acquireTime ? spec.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: (spec.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
    try {
      const updated = await http.request<LeaseObject>('PUT', this.path(), {
        body: {
          ...current,
          metadata: {
            ...current.metadata,
            annotations: { ...current.metadata.annotations, ...this.annotations() },
          },
          spec: next,
        },
      });
      this.observe(updated);
      return true;
    } catch (error) {
      // Someone else wrote the Lease since we read it: they won this round.
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }

  /** client-go's release: holder cleared and a 1 s duration, so the next candidate acquires at once. */
  private async release(): Promise<void> {
    const { http, namespace, name, identity } = this.options;
    const current = await getObject<LeaseObject>(http, LEASE, namespace, name);
    if (!current || current.spec?.holderIdentity !== identity) return;
    const now = microTime(Date.now());
    const annotations = { ...current.metadata.annotations };
    delete annotations[ANNOTATION_LEADER_URL];
    await http.request('PUT', this.path(), {
      body: {
        ...current,
        metadata: { ...current.metadata, annotations },
        spec: {
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: current.spec?.leaseTransitions ?? 0,
        },
      },
    });
  }
}
