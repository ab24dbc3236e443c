import type { ObjectStore } from '../core/interfaces.js';
import type { SyncResult } from '../reconcile/source-sync.js';

/** What the API needs from the rest of the system; main.ts provides it. */
export interface ApiContext {
  store: ObjectStore;
  platformName: 'local' | 'kube';
  syncNow(namespace: string, name: string, options?: { force?: boolean }): Promise<SyncResult | undefined>;
  retryBuild(namespace: string, name: string): void;
  isReady(): boolean;
}
