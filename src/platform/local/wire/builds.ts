/**
 * The local build subsystem, wired: the builder (sandboxed installs and compiles into the state
 * directory), the archive of kept builds, and their garbage collection past the history limit. What
 * a kill left half-staged is removed before anything builds.
 */
import type { Logger } from 'pino';
import type { LocalConfig } from '../../../config/config.js';
import { Broadcast } from '../../../core/broadcast.js';
import type { ProcessLauncher } from '../../../core/interfaces.js';
import type { BuildRecord, SlessFunction } from '../../../core/resources.js';
import { BuildCollector } from '../../../reconcile/build-gc.js';
import { LocalBuildArchive } from '../build/build-archive.js';
import { LocalBuilder } from '../build/local-builder.js';
import type { LocalPlatform } from '../local-platform.js';
import type { LocalState } from '../local-state.js';
import type { MemoryStore } from '../memory-store.js';

export interface LocalBuilds {
  builder: LocalBuilder;
  gc: BuildCollector;
}

export async function wireLocalBuilds(deps: {
  config: LocalConfig;
  logger: Logger;
  launcher: ProcessLauncher;
  state: LocalState;
  store: MemoryStore;
  /** Which build directories serve now: never collected. */
  platform: Pick<LocalPlatform, 'pinnedBuildDirs'>;
  /** Told every finished build (metrics, history), after garbage collection is asked for. */
  onBuildFinished: (record: BuildRecord, fn: SlessFunction) => void;
}): Promise<LocalBuilds> {
  const { config, logger } = deps;
  // The builder tells the collector of each build it finished; the collector needs the builder first.
  const finishedBuilds = new Broadcast<[BuildRecord, SlessFunction]>();
  const builder = new LocalBuilder({
    stateDir: config.stateDir,
    ...(config.buildCacheDir ? { cacheDir: config.buildCacheDir } : {}),
    runtimesDir: config.runtimesDir,
    logger,
    launcher: deps.launcher,
    onBuildFinished: finishedBuilds.emit,
    failedBuilds: deps.state.failedBuilds,
  });
  const archive = new LocalBuildArchive({
    stateDir: config.stateDir,
    builder,
    servingDirs: () => deps.platform.pinnedBuildDirs(),
    limit: config.buildHistory,
    logger,
  });
  // Nothing builds yet: every staging directory is what a kill left behind.
  await archive.removeLeftovers();
  const gc = new BuildCollector({ store: deps.store, archive, limit: config.buildHistory, logger });
  finishedBuilds.subscribe((record, fn) => {
    deps.onBuildFinished(record, fn);
    // History grew by one: the oldest may now be past the limit, even if the new one never serves.
    gc.request(undefined, fn.metadata);
  });
  return { builder, gc };
}
