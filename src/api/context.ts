/**
 * The boundary between the HTTP API and the rest of sless: everything a route may ask of the
 * system, as one interface that main.ts fills in for either platform. Routes depend on this alone,
 * so they serve local and kube mode alike and tests can hand them a fake.
 */
import type { NamespaceRegistry, ObjectStore } from '../core/interfaces.js';
import type { Leadership } from '../core/leadership.js';
import type { FunctionLogReader } from '../core/logs.js';
import type { Quotas } from '../core/quotas.js';
import type { BuildRecord } from '../core/resources.js';
import type { SyncResult } from '../reconcile/source-sync.js';
import type { InvocationsApi } from './routes/invocations.js';
import type { SecretsApi } from './routes/secrets.js';

/** What the API needs from the rest of the system; main.ts provides it. */
export interface ApiContext extends NamespaceRegistry {
  store: ObjectStore;
  platformName: 'local' | 'kube';
  syncNow(namespace: string, name: string, options?: { force?: boolean }): Promise<SyncResult | undefined>;
  retryBuild(namespace: string, name: string): void;
  isReady(): boolean;
  /** Who reconciles (one leader among replicas); shown by /readyz and GET /v1/leader. */
  leadership: Leadership;
  /**
   * The shared secret a source's webhooks are signed with. Local mode reads the environment; the kube
   * platform reads a Secret. Undefined means webhooks for that source are refused.
   */
  webhookSecret(namespace: string, source: string): Promise<string | undefined>;
  /** Per-namespace limits; DEFAULT_QUOTAS when omitted. */
  quotas?: Quotas;
  /** Recent builds of one function, newest first (bounded); status only keeps the last one. */
  buildHistory?(namespace: string, name: string): readonly BuildRecord[];
  /** Told of each build the history records (the dashboard's live feed); returns the unsubscribe. */
  onBuildRecorded?(listener: (namespace: string, name: string, record: BuildRecord) => void): () => void;
  /** Pins a source to a commit of its branch (undefined unpins) and syncs it. */
  pinSource?(namespace: string, name: string, commit: string | undefined): Promise<SyncResult | undefined>;
  /** Function stdout/stderr: runtime processes locally, pods/log on kube. */
  functionLogs?: FunctionLogReader;
  /** The local secrets store; on kube, secrets are Kubernetes Secrets and this is left out. */
  secrets?: SecretsApi;
  /** Asynchronous invocations (state, attempts, dead letters); 404 where a platform has none. */
  invocations?: InvocationsApi;
}
