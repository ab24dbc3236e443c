/**
 * Builds the real app (real routes, auth, validation, MemoryStore) around a context whose syncNow
 * only records calls. That is a test double of the controller, and deliberately so: the controller is
 * tested on its own elsewhere; these suites test the HTTP surface.
 */

import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../../src/api/app.js';
import { type Authenticator, NoAuthAuthenticator } from '../../src/api/auth/authenticator.js';
import type { ApiContext } from '../../src/api/context.js';
import { SlessMetrics } from '../../src/api/metrics.js';
import type { RouteResolver } from '../../src/core/interfaces.js';
import { ALWAYS_LEADER } from '../../src/core/leadership.js';
import type { AnyResource } from '../../src/core/resources.js';
import { MemoryStore } from '../../src/platform/local/memory-store.js';
import { observedFunctionProxy } from '../../src/proxy/function-proxy.js';
import type { SyncResult } from '../../src/reconcile/source-sync.js';

export interface Harness {
  app: FastifyInstance;
  store: MemoryStore;
  metrics: SlessMetrics;
  syncCalls: Array<{ namespace: string; name: string; force: boolean }>;
  /** Every retryBuild the API asked the controller for. */
  rebuilds: Array<{ namespace: string; name: string }>;
  /** Resolves on the next syncNow call. */
  nextSync(): Promise<{ namespace: string; name: string }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  authenticator?: Authenticator;
  secrets?: Record<string, string>;
  bodyLimit?: number;
  logger?: import('pino').Logger;
  buildHistory?: ApiContext['buildHistory'];
  /** The readiness the /readyz probe reports; ready unless given. */
  isReady?: () => boolean;
  /** The local secrets store behind `…/secrets` (none: the kube platform's 404). */
  secretStore?: ApiContext['secrets'];
}

const noRoutes: RouteResolver = { resolve: async () => ({ state: 'unknown' }) };

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const store = new MemoryStore();
  const syncCalls: Harness['syncCalls'] = [];
  const rebuilds: Harness['rebuilds'] = [];
  let waiters: Array<(call: { namespace: string; name: string }) => void> = [];
  const metrics = new SlessMetrics();
  const context: ApiContext = {
    store,
    platformName: 'local',
    syncNow: async (namespace, name, o): Promise<SyncResult | undefined> => {
      syncCalls.push({ namespace, name, force: o?.force === true });
      const pending = waiters;
      waiters = [];
      for (const w of pending) w({ namespace, name });
      return { outcome: 'unchanged', commit: '0'.repeat(40) };
    },
    retryBuild: (namespace, name) => {
      rebuilds.push({ namespace, name });
    },
    isReady: options.isReady ?? (() => true),
    leadership: ALWAYS_LEADER,
    namespaceExists: (ns) => store.namespaceExists(ns),
    ensureNamespace: (ns) => store.ensureNamespace(ns),
    webhookSecret: async (ns, source) => options.secrets?.[`${ns}/${source}`],
    ...(options.buildHistory ? { buildHistory: options.buildHistory } : {}),
    ...(options.secretStore ? { secrets: options.secretStore } : {}),
  };
  const logger = options.logger ?? pino({ level: process.env.SLESS_TEST_LOG ?? 'silent' });
  const app = await buildApp({
    context,
    proxy: observedFunctionProxy({ routes: noRoutes, metrics, logger }),
    logger,
    authenticator: options.authenticator ?? new NoAuthAuthenticator(),
    metrics,
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
  });
  await app.ready();
  return {
    app,
    store,
    metrics,
    syncCalls,
    rebuilds,
    nextSync: () => new Promise((resolve) => waiters.push(resolve)),
    close: () => app.close(),
  };
}

export function fn(namespace: string, name: string): AnyResource {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name, namespace },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  };
}

export function gitSource(namespace: string, name: string, branch = 'main'): AnyResource {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'GitSource',
    metadata: { name, namespace },
    spec: { url: 'https://git.example.com/repo.git', branch, path: '.', interval: '1m', suspend: false },
  };
}
