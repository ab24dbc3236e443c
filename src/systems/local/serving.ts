/**
 * The local serving side, opened in the order a restart needs: what the last run left (state), the
 * sandbox probe, the authentication rule that follows from it, and the platform that restores what
 * served, and the pin a restart keeps for the command line's source. Nothing here reaches git or
 * loads the control plane.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Authenticator } from '../../api/auth/authenticator.js';
import { createAuthenticator } from '../../api/auth/factory.js';
import { ConfigError, type LocalConfig } from '../../config/config.js';
import { branchOf } from '../../core/defaults.js';
import type { ObjectStore } from '../../core/interfaces.js';
import type { ProxyThread } from '../../core/proxy-thread.js';
import { ReconcileRequests } from '../../core/reconcile-requests.js';
import type { GitSource } from '../../core/resources.js';
import { startupMark } from '../../core/startup-marks.js';
import { findKeptBuild } from '../../platform/local/build/build-archive.js';
import { FunctionLogBuffer } from '../../platform/local/function-logs.js';
import type { LocalPlatform } from '../../platform/local/local-platform.js';
import { LocalState } from '../../platform/local/local-state.js';
import { MemoryStore } from '../../platform/local/memory-store.js';
import { createLauncher, describeIsolation, type SandboxLauncher } from '../../sandbox/probe.js';
import { LocalSecretStore } from '../../secrets/local-store.js';

export interface LocalServing {
  state: LocalState;
  launcher: SandboxLauncher;
  store: MemoryStore;
  platform: LocalPlatform;
  logs: FunctionLogBuffer;
  secrets: LocalSecretStore;
  authenticator: Authenticator;
  /** The platform, the scheduler and the queue consumers ask for reconciles here; the controller listens. */
  requests: ReconcileRequests;
}

/** Opens state and the sandbox side by side, then builds the platform over them (not yet restored). */
export async function openLocalServing(
  config: LocalConfig,
  logger: Logger,
  gateway: ProxyThread | undefined,
): Promise<LocalServing> {
  // What the last run left comes first: the objects it had applied (with their status), the revisions
  // that served and the builds that failed. A restart then starts from there, not from nothing. The
  // probe's children run while the serving path (undici, the proxy, prom-client) loads.
  const [state, launcher, { LocalPlatform }] = await Promise.all([
    LocalState.open(config.stateDir, logger).then((state) => {
      startupMark('state loaded');
      return state;
    }),
    createLauncher({
      runDir: join(config.stateDir, 'sandbox'),
      logger,
      ...(config.sandbox === 'off' ? { disabled: 'turned off with --sandbox off (single-user mode)' } : {}),
    }).then((launcher) => {
      startupMark('sandbox probed');
      return launcher;
    }),
    import('../../platform/local/local-platform.js'),
  ]);
  const store: MemoryStore = new MemoryStore({
    ...(state.storeSnapshot ? { initial: state.storeSnapshot } : {}),
    persist: (change) => state.saveStore(() => store.snapshotJson(), change),
  });
  const authenticator = createAuthenticator(config.auth);
  if (config.authDisabled)
    logger.warn(
      `AUTHENTICATION IS OFF: anyone who can reach ${config.host}:${config.port} may use /v1 as an admin (local loopback mode only)`,
    );
  else logger.info({ auth: authenticator.description }, '/v1 requires a bearer token');
  const isolation = describeIsolation(launcher.report);
  if (!config.authDisabled && !launcher.report.sandboxed) {
    await launcher.close();
    throw new ConfigError(
      `authentication is on, so tenants' code would run here, and it runs only in a sandbox: ${launcher.report.notEnforced[0]}`,
    );
  }
  if (launcher.report.sandboxed && launcher.report.notEnforced.length === 0) logger.info(isolation);
  else logger.warn(isolation);
  const logs = new FunctionLogBuffer();
  // Sealed at rest under a key kept apart; opened before anything starts a function that needs it.
  const secrets = new LocalSecretStore({ stateDir: config.stateDir, logger }).open();
  const requests = new ReconcileRequests();
  const platform = new LocalPlatform({
    runtimesDir: config.runtimesDir,
    store,
    logger,
    logs,
    launcher,
    ...(config.scaleToZeroAfterSeconds ? { defaultIdleSeconds: config.scaleToZeroAfterSeconds } : {}),
    serving: state.serving,
    onChanged: requests.requester('Function'),
    secrets,
    ...(gateway ? { activity: gateway.activity, mirror: gateway } : {}),
    keptBuild: (ns, name, commit) => findKeptBuild(config.stateDir, ns, name, commit),
  });
  return { state, launcher, store, platform, logs, secrets, authenticator, requests };
}

/**
 * The source given on the command line, with the pin (spec.ref) of the same source as the durable
 * store kept it, so a restart serves the pinned commit, not the branch head. Only for the same
 * repository and branch: a pin means nothing on another one.
 */
export async function withStoredPin(store: ObjectStore, source: GitSource): Promise<GitSource> {
  const stored = await store.get('GitSource', source.metadata.namespace, source.metadata.name);
  const ref = stored?.spec.ref;
  if (!ref?.commit || stored?.spec.url !== source.spec.url) return source;
  if (branchOf(stored) !== branchOf(source)) return source;
  return { ...source, spec: { ...source.spec, ref } };
}
