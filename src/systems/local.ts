/**
 * The embedded system, wired in the order a restart needs: state, the sandbox probe and the platform
 * restoring what served (local/serving.ts), the /fn/ data path (local/data-path.ts), then the
 * builder, scheduler, controller and API (local/control-plane.ts). This file lists them and stops
 * them in the reverse order.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { LocalConfig } from '../config/config.js';
import type { GitSource } from '../core/resources.js';
import { startupMark } from '../core/startup-marks.js';
import type { LocalBuilder } from '../platform/local/build/local-builder.js';
import type { LocalCronScheduler } from '../platform/local/cron-scheduler.js';
import { LocalAutoscaler } from '../platform/local/local-autoscaler.js';
import type { LocalPlatform } from '../platform/local/local-platform.js';
import type { LocalState } from '../platform/local/local-state.js';
import type { MemoryStore } from '../platform/local/memory-store.js';
import type { BuildCollector } from '../reconcile/build-gc.js';
import type { Controller } from '../reconcile/controller.js';
import type { ClientListener } from '../server/early-listener.js';
import { createLogger, once, type ProxyThread } from './common.js';
import { localCommitStatus, localControlPlane } from './local/control-plane.js';
import { wireLocalDataPath } from './local/data-path.js';
import { openLocalServing, withStoredPin } from './local/serving.js';

export interface LocalSystem {
  app: FastifyInstance;
  store: MemoryStore;
  controller: Controller;
  platform: LocalPlatform;
  builder: LocalBuilder;
  scheduler: LocalCronScheduler;
  /** What survives a restart; `platform.pinnedBuildDirs()` is what build GC must keep. */
  state: LocalState;
  /** Build garbage collection past the history limit. */
  gc: BuildCollector;
  /** Sets the instances of functions with spec.scale from their in-flight requests, tick by tick. */
  autoscaler: LocalAutoscaler;
  url: string;
  stop(): Promise<void>;
}

/** Starts the embedded platform; `source` registers a GitSource once the controller runs. */
export async function startLocalSystem(
  config: LocalConfig,
  options: {
    logger?: Logger;
    source?: GitSource;
    listener?: ClientListener;
    /** The proxy thread, when `/fn/` is served from one: routes, counts and tallies cross to it. */
    gateway?: ProxyThread;
  } = {},
): Promise<LocalSystem> {
  const logger = options.logger ?? createLogger(config);
  const { listener } = options;
  const serving = await openLocalServing(config, logger, options.gateway);
  const { state, launcher, store, platform } = serving;
  // Serve first: the revisions that served before start from their builds on disk before the API and
  // the controller load (a request that arrives meanwhile waits for its function). Only then does the
  // controller look at git, so an unreachable server or a rejected head cannot delay or undo what
  // served. The restored processes are spawned before the rest loads, so they boot meanwhile.
  const restored = platform.restore();
  await restored.launched;
  startupMark('restored launched');
  const dataPath = await wireLocalDataPath({
    config,
    logger,
    store,
    platform,
    gateway: options.gateway,
    listener,
  });
  const { proxy, upgrades, asyncInvocations } = dataPath;
  await restored.serving;
  startupMark('restored');
  // This start may have used the toolchains the last one found; they are looked up again now.
  void launcher.checkToolchains();
  const { guardedGitHttp } = await import('../source/guarded-http.js');
  const gitHttp = guardedGitHttp(dataPath.outbound);
  const listening: { origin?: string } = {};
  let parts: Awaited<ReturnType<typeof localControlPlane>>;
  let address: string;
  try {
    parts = await localControlPlane(config, { logger, serving, dataPath, gitHttp, listener, listening });
    if (listener) {
      await parts.app.ready();
      address = listener.url;
    } else address = await parts.app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await asyncInvocations.stop();
    await platform.stopAll();
    await proxy.close();
    await gitHttp.close();
    await launcher.close();
    throw error;
  }
  const { app, controller, builder, scheduler, gc } = parts;
  if (!listener) app.server.on('upgrade', (req, socket, head) => upgrades.handle(req, socket, head));
  startupMark('control plane loaded');
  await controller.start();
  listening.origin = address.replace('//0.0.0.0', '//127.0.0.1');
  await asyncInvocations.start(address);
  // Functions with spec.scale run as many instances as their in-flight requests ask for.
  const autoscaler = new LocalAutoscaler({ platform, logger });
  autoscaler.start();
  const commitStatus = await localCommitStatus(config, store, gitHttp, logger);
  if (options.source) await store.apply(await withStoredPin(store, options.source));
  // The first pass removes the history of functions deleted while sless was stopped.
  gc.start();
  gc.request();
  parts.markReady();
  startupMark('ready');
  return {
    app,
    store,
    controller,
    platform,
    autoscaler,
    builder,
    scheduler,
    state,
    gc,
    url: address,
    stop: once(async () => {
      parts.markUnready();
      // Attempts in flight are cut and recorded as interrupted, to be sent again after a start.
      await asyncInvocations.stop();
      autoscaler.stop();
      await gc.stop();
      await controller.stop();
      // Once the controller takes no outcome: runs are cut, their secret files removed.
      await parts.jobs.stop();
      await commitStatus.stop();
      scheduler.stopAll();
      await parts.queueTriggers.stopAll();
      await listener?.drainClients?.();
      await app.close();
      await listener?.close();
      await platform.stopAll();
      await gitHttp.close();
      await launcher.close();
      await state.close();
    }),
  };
}
