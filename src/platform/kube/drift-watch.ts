/**
 * Watches what the controller made (found by label): the Deployments and Services of Functions and
 * the CronJobs of cron Triggers. Whenever one is deleted or its spec is edited by someone else it
 * reports the owning Function or Trigger, so the reconcile puts it back within moments instead of at
 * the next resync.
 */

import type { Logger } from 'pino';
import { objectKey } from '../../core/object-key.js';
import { FIELD_MANAGER } from '../../core/resources.js';
import { type ChangeSignal, deploymentKey } from './change-signal.js';
import type { KubeHttp } from './http.js';
import {
  LABEL_COMMIT_OF,
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  LABEL_TRIGGER,
  MANAGED_BY,
} from './labels.js';
import type { KubeObject } from './objects.js';
import { CRONJOB, DEPLOYMENT, type ResourceType, SERVICE } from './resource-types.js';
import { runWatchLoop } from './watch-loop.js';

/** Why an owner is told: its object was deleted, changed by someone else, or its ready instances moved. */
export type DriftCause = 'deleted' | 'changed' | 'instances';

/** Which sless object a drifted one belongs to. */
export type DriftOwner = 'Function' | 'Trigger';

interface Watched {
  type: ResourceType;
  owner: DriftOwner;
  /** The label naming the owner. */
  ownerLabel: string;
  labels: Record<string, string>;
}

const FUNCTION_PART = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function' };
const TRIGGER_PART = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'trigger' };

const WATCHED: readonly Watched[] = [
  { type: DEPLOYMENT, owner: 'Function', ownerLabel: LABEL_FUNCTION, labels: FUNCTION_PART },
  { type: SERVICE, owner: 'Function', ownerLabel: LABEL_FUNCTION, labels: FUNCTION_PART },
  { type: CRONJOB, owner: 'Trigger', ownerLabel: LABEL_TRIGGER, labels: TRIGGER_PART },
];

interface ManagedFieldsEntry {
  manager?: string;
  time?: string;
  fieldsV1?: Record<string, unknown>;
}

/**
 * Whether the object's spec was last changed by the controller's own apply, read from managedFields:
 * the API server moves an entry's time forward whenever its manager changes a field it owns, so the
 * newest entry that owns spec fields is the last writer of the spec. Two managers within the same
 * second cannot be told apart: that counts as someone else (a reconcile too many, never one too few).
 */
export function specChangedByController(object: KubeObject): boolean {
  const writers = ((object.metadata.managedFields ?? []) as ManagedFieldsEntry[])
    .filter((e) => e.fieldsV1?.['f:spec'] !== undefined && e.time)
    .sort((a, b) => (b.time ?? '').localeCompare(a.time ?? ''));
  const [newest, next] = writers;
  if (newest?.manager !== FIELD_MANAGER) return false;
  return next === undefined || next.time !== newest.time || next.manager === FIELD_MANAGER;
}

interface Seen {
  /** The spec's generation (Services have none: their resourceVersion stands in). */
  version: string;
  replicas: number | undefined;
  /** Ready instances (Deployments): status reports them, so a change is reported too. */
  ready: number | undefined;
  fn: string;
  namespace: string;
}

export class DriftWatch {
  private readonly http: KubeHttp;
  private readonly logger: Logger;
  private readonly namespaces: readonly (string | undefined)[];
  private readonly onDrift: (owner: DriftOwner, namespace: string, name: string, cause: DriftCause) => void;
  private readonly retryMs: number;
  private readonly changes: ChangeSignal | undefined;
  private readonly aborts = new Set<AbortController>();
  private stopped = false;

  constructor(options: {
    http: KubeHttp;
    logger: Logger;
    /** Namespaces to watch; all when absent. */
    namespaces?: readonly string[];
    onDrift: (owner: DriftOwner, namespace: string, name: string, cause: DriftCause) => void;
    retryMs?: number;
    /** Told of every change of a Deployment, for rollouts that wait on one. */
    changes?: ChangeSignal;
  }) {
    this.changes = options.changes;
    this.http = options.http;
    this.logger = options.logger;
    this.namespaces = options.namespaces ?? [undefined];
    this.onDrift = options.onDrift;
    this.retryMs = options.retryMs ?? 1000;
  }

  start(): void {
    for (const watched of WATCHED) for (const namespace of this.namespaces) void this.run(watched, namespace);
  }

  stop(): void {
    this.stopped = true;
    for (const abort of this.aborts) abort.abort();
  }

  private run(watched: Watched, namespace: string | undefined): Promise<void> {
    const { type, owner, ownerLabel, labels } = watched;
    const seen = new Map<string, Seen>();
    const seenOf = (o: KubeObject, fn: string): Seen => ({
      version: type === SERVICE ? (o.metadata.resourceVersion ?? '') : String(o.metadata.generation ?? ''),
      replicas: (o.spec as { replicas?: number } | undefined)?.replicas,
      ready:
        type === DEPLOYMENT
          ? ((o.status as { readyReplicas?: number } | undefined)?.readyReplicas ?? 0)
          : undefined,
      fn,
      namespace: o.metadata.namespace ?? '',
    });
    // Status updates (rollout progress) keep the generation: only spec edits are drift, and only
    // someone else's. The controller's own rollout is no reason to reconcile again; a change of
    // replicas is (the scaler's scale to zero or up, whose status the reconcile reports), and the
    // scale subresource records no field manager to tell it by.
    // Ready instances moving is no drift, but status reports them: the owner is told as well.
    const drifted = (before: Seen | undefined, now: Seen, o: KubeObject): DriftCause | undefined => {
      if (before === undefined) return undefined;
      if (before.version !== now.version && (before.replicas !== now.replicas || !specChangedByController(o)))
        return 'changed';
      return before.ready !== now.ready ? 'instances' : undefined;
    };
    // A commit revision (commit-manifests.ts) carries the function label, but is the scaler's to
    // create and delete: nothing the Function's reconcile would put back.
    const ownerOf = (o: KubeObject) =>
      o.metadata.labels?.[LABEL_COMMIT_OF] ? undefined : o.metadata.labels?.[ownerLabel];
    const report = (ns: string, name: string | undefined, cause: DriftCause) => {
      if (name && !this.stopped) this.onDrift(owner, ns, name, cause);
    };
    // Whoever waits for a Deployment to roll out reads it again when it moves.
    const changed = (o: KubeObject) => {
      if (type === DEPLOYMENT)
        this.changes?.notify(deploymentKey(o.metadata.namespace ?? '', o.metadata.name));
    };
    const abort = new AbortController();
    this.aborts.add(abort);
    if (this.stopped) abort.abort();
    return runWatchLoop(
      {
        http: this.http,
        logger: this.logger,
        type,
        namespace,
        labels,
        retryMs: this.retryMs,
        what: 'drift watch',
        onList: (items) => {
          const present = new Set<string>();
          for (const o of items) {
            const key = objectKey(o.metadata.namespace ?? '', o.metadata.name);
            present.add(key);
            const now = seenOf(o, ownerOf(o) ?? '');
            const cause = drifted(seen.get(key), now, o);
            if (cause) report(now.namespace, now.fn, cause);
            seen.set(key, now);
            changed(o);
          }
          // Deleted while this watch was down.
          for (const [key, entry] of seen)
            if (!present.has(key)) {
              seen.delete(key);
              report(entry.namespace, entry.fn, 'deleted');
            }
        },
        onEvent: (phase, o) => {
          const key = objectKey(o.metadata.namespace ?? '', o.metadata.name);
          const fn = ownerOf(o);
          changed(o);
          if (phase === 'DELETED') {
            seen.delete(key);
            report(o.metadata.namespace ?? '', fn, 'deleted');
            return;
          }
          const before = seen.get(key);
          const now = seenOf(o, fn ?? '');
          seen.set(key, now);
          const cause = phase === 'MODIFIED' ? drifted(before, now, o) : undefined;
          if (cause) report(now.namespace, now.fn, cause);
        },
      },
      abort.signal,
    ).finally(() => this.aborts.delete(abort));
  }
}
