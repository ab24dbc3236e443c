/**
 * The real `sless dev` process on a fresh copy of examples-repo/, in a temp directory of its own (the
 * repository and the state directory), as the dashboard suites start it; close() stops it with SIGTERM
 * and removes the directory.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureExamplesRepository } from '../../src/cli/examples-repo.js';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import { freePort } from '../../src/platform/local/ports.js';
import { tempDir } from './git.js';
import { TEST_BUILD_CACHE } from './local-system.js';
import { SlessProcess } from './sless-process.js';

export interface ExamplesDev {
  /** The examples repository sless dev syncs, for a test to commit to. */
  repo: string;
  sless: SlessProcess;
  close(): Promise<void>;
}

export async function startExamplesDev(prefix: string): Promise<ExamplesDev> {
  const work = await tempDir(prefix);
  try {
    const repo = (await ensureExamplesRepository(join(PACKAGE_ROOT, 'examples-repo'), join(work, 'repo')))
      .path;
    const sless = await SlessProcess.start({
      repo,
      stateDir: join(work, 'state'),
      port: await freePort(),
      env: { SLESS_BUILD_CACHE_DIR: TEST_BUILD_CACHE },
    });
    return {
      repo,
      sless,
      async close() {
        await sless.stop('SIGTERM');
        await rm(work, { recursive: true, force: true });
      },
    };
  } catch (error) {
    // The caller never gets the directory to remove.
    await rm(work, { recursive: true, force: true });
    throw error;
  }
}
