/**
 * Watches the build Jobs and their pods in the controller's namespace and signals each change by the
 * Job's name, so a build in progress reads its Job when it moved (created, kaniko done, Complete or
 * Failed) instead of every two seconds.
 */
import type { Logger } from 'pino';
import { buildJobKey, type ChangeSignal } from '../change-signal.js';
import type { KubeHttp } from '../http.js';
import { Informer } from '../informer.js';
import { LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY } from '../labels.js';
import type { KubeObject } from '../objects.js';
import { JOB, POD } from '../resource-types.js';
import { LABEL_BUILD } from './kaniko-job.js';

const BUILD_SELECTOR = `${LABEL_COMPONENT}=build,${LABEL_MANAGED_BY}=${MANAGED_BY}`;

export class BuildWatch {
  private readonly informers: Informer[];

  constructor(options: {
    http: KubeHttp;
    logger: Logger;
    controllerNamespace: string;
    changes: ChangeSignal;
  }) {
    const { http, logger, controllerNamespace, changes } = options;
    this.informers = [JOB, POD].map((type) => {
      // A pod names its Job in a label; a Job is named itself.
      const jobOf = (o: KubeObject) => (type === POD ? o.metadata.labels?.[LABEL_BUILD] : o.metadata.name);
      return new Informer({
        http,
        logger,
        type,
        namespaces: [controllerNamespace],
        selector: BUILD_SELECTOR,
        onChange: (o) => {
          const job = jobOf(o);
          if (job) changes.notify(buildJobKey(job));
        },
      });
    });
  }

  start(): void {
    for (const informer of this.informers) informer.start();
  }

  stop(): void {
    for (const informer of this.informers) informer.stop();
  }
}
