/**
 * Kubernetes Events for GitSources and Functions, so `kubectl describe` and `kubectl get events`
 * tell of syncs, builds, rollouts and prunes. The same event repeated within a few minutes is sent
 * once: a retry loop must not flood the namespace's event list.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { asError } from '../../core/errors.js';
import type { EventRecorder, EventType } from '../../core/interfaces.js';
import type { AnyResource } from '../../core/resources.js';
import type { KubeHttp } from './http.js';

const COMPONENT = 'sless-controller';
const MAX_MESSAGE = 1024;

export class KubeEventRecorder implements EventRecorder {
  private readonly http: KubeHttp;
  private readonly logger: Logger;
  private readonly repeatAfterMs: number;
  private readonly instance: string;
  private readonly lastSent = new Map<string, number>();

  /** `instance`: which replica reports (kubectl's "From"); the host name when not given. */
  constructor(options: { http: KubeHttp; logger: Logger; repeatAfterMs?: number; instance?: string }) {
    this.http = options.http;
    this.instance = options.instance ?? hostname();
    this.logger = options.logger;
    this.repeatAfterMs = options.repeatAfterMs ?? 300_000;
  }

  record(object: AnyResource, type: EventType, reason: string, message: string): void {
    const { namespace, name, uid } = object.metadata;
    const text = message.slice(0, MAX_MESSAGE);
    const key = `${object.kind}/${namespace}/${name}/${type}/${reason}/${text}`;
    const now = Date.now();
    const last = this.lastSent.get(key);
    if (last !== undefined && now - last < this.repeatAfterMs) return;
    this.lastSent.set(key, now);
    if (this.lastSent.size > 10_000) {
      for (const [k, t] of this.lastSent) if (now - t >= this.repeatAfterMs) this.lastSent.delete(k);
    }
    const time = new Date(now).toISOString();
    const body = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${name}.`, namespace },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name,
        namespace,
        ...(uid ? { uid } : {}),
        ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}),
      },
      type,
      reason,
      message: text,
      source: { component: COMPONENT },
      reportingComponent: `sless.dev/${COMPONENT}`,
      reportingInstance: this.instance,
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
    };
    this.http
      .request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body })
      .catch((error: unknown) =>
        this.logger.debug({ err: asError(error).message, reason }, 'cannot record an event'),
      );
  }
}
