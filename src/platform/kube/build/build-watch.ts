/**
 * Watches the build Jobs and their pods in the controller's namespace and signals each change by the
 * Job's name, so a build in progress reads its Job when it moved (created, kaniko done, Complete or
 * Failed) instead of every two seconds.
 */
import type { Logger } from 'pino';
import { buildJobKey, type ChangeSignal } from '../change-signal.js';
import type { KubeHttp } from '../http.js';
import { LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from '../labels.js';
import type { KubeObject } from '../objects.js';
import { JOB, POD } from '../resource-types.js';
import { runWatchLoop } from '../watch-loop.js';
import { LABEL_BUILD } from './kaniko-job.js';

const BUILD_PARTS = { [LABEL_COMPONENT]: 'build', [LABEL_MANAGED_BY]: MANAGED_BY };

export class BuildWatch {
  private readonly abort = new AbortController();
  private readonly options: {
    http: KubeHttp;
    logger: Logger;
    controllerNamespace: string;
    changes: ChangeSignal;
    retryMs?: number;
  };

  constructor(options: BuildWatch['options']) {
    this.options = options;
  }

  start(): void {
    const { http, logger, controllerNamespace, changes } = this.options;
    for (const type of [JOB, POD]) {
      // A pod names its Job in a label; a Job is named itself.
      const jobOf = (o: KubeObject) => (type === POD ? o.metadata.labels?.[LABEL_BUILD] : o.metadata.name);
      const changed = (o: KubeObject) => {
        const job = jobOf(o);
        if (job) changes.notify(buildJobKey(job));
      };
      void runWatchLoop(
        {
          http,
          logger,
          type,
          namespace: controllerNamespace,
          labels: BUILD_PARTS,
          retryMs: this.options.retryMs ?? 1000,
          what: 'build watch',
          onList: (items) => {
            for (const o of items) changed(o);
          },
          onEvent: (_phase, o) => changed(o),
        },
        this.abort.signal,
      );
    }
  }

  stop(): void {
    this.abort.abort();
  }
}
