/**
 * Cron Triggers as CronJobs in the function's namespace: each run POSTs the trigger's event to the
 * function's Service with a pinned curl image, as an HTTP caller would. Disabled triggers suspend the
 * CronJob in place. The curl image goes through the registry map of the builds: a cluster that pulls
 * base images from a mirror cannot pull curl from its origin either.
 */
import { Cron } from 'croner';
import { sha256Hex } from '../../core/hash.js';
import type { TriggerScheduler } from '../../core/interfaces.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../../core/resources.js';
import { API_VERSION } from '../../core/schemas.js';
import { mirroredImage } from './build/kaniko-job.js';
import type { KubeHttp } from './http.js';
import { LABEL_COMPONENT, LABEL_FUNCTION, LABEL_MANAGED_BY, LABEL_TRIGGER, MANAGED_BY } from './labels.js';
import { apply, deleteObject, type KubeObject } from './objects.js';
import { CRONJOB } from './resource-types.js';
import { serviceOrigin } from './routes.js';

/** Pinned by version (never :latest); bump deliberately. */
export const CURL_IMAGE = 'curlimages/curl:8.10.1';

/** CronJob names are capped at 52 characters (the controller appends an 11-character suffix). */
export const CRONJOB_NAME_MAX = 52;

export function cronJobName(trigger: string): string {
  const full = `trigger-${trigger}`;
  if (full.length <= CRONJOB_NAME_MAX) return full;
  const digest = sha256Hex(full).slice(0, 8);
  return `${full.slice(0, CRONJOB_NAME_MAX - digest.length - 1).replace(/-+$/, '')}-${digest}`;
}

export function cronJobFor(
  trigger: Trigger,
  fn: SlessFunction | undefined,
  registryMap: readonly string[] = [],
): KubeObject {
  const { namespace, name } = trigger.metadata;
  if (!trigger.metadata.uid) throw new Error(`trigger ${name} has no uid; read it from the API first`);
  const timeoutSec = fn?.spec.timeoutSec ?? 30;
  const labels = {
    [LABEL_COMPONENT]: 'trigger',
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_TRIGGER]: name,
    [LABEL_FUNCTION]: trigger.spec.function,
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: {
      name: cronJobName(name),
      namespace,
      labels,
      ownerReferences: [
        { apiVersion: API_VERSION, kind: 'Trigger', name, uid: trigger.metadata.uid, controller: true },
      ],
    },
    spec: {
      schedule: trigger.spec.schedule ?? '',
      ...(trigger.spec.timezone ? { timeZone: trigger.spec.timezone } : {}),
      suspend: trigger.spec.enabled === false || fn === undefined,
      concurrencyPolicy: 'Forbid',
      successfulJobsHistoryLimit: 1,
      failedJobsHistoryLimit: 1,
      jobTemplate: {
        metadata: { labels },
        spec: {
          backoffLimit: 0,
          activeDeadlineSeconds: timeoutSec + 30,
          template: {
            metadata: { labels },
            spec: {
              restartPolicy: 'Never',
              automountServiceAccountToken: false,
              containers: [
                {
                  name: 'invoke',
                  image: mirroredImage(CURL_IMAGE, registryMap),
                  args: [
                    '-sS',
                    '--fail-with-body',
                    '--max-time',
                    String(timeoutSec + 5),
                    '-X',
                    'POST',
                    '-H',
                    'content-type: application/json',
                    '-H',
                    `x-sless-trigger: ${name}`,
                    '--data',
                    JSON.stringify(trigger.spec.event ?? {}),
                    `${serviceOrigin(namespace, trigger.spec.function)}/`,
                  ],
                  resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
                  securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 100 },
                },
              ],
            },
          },
        },
      },
    },
  };
}

export class KubeCronScheduler implements TriggerScheduler {
  private readonly http: KubeHttp;
  private readonly registryMap: readonly string[];

  constructor(options: { http: KubeHttp; registryMap?: readonly string[] }) {
    this.http = options.http;
    this.registryMap = options.registryMap ?? [];
  }

  async apply(trigger: Trigger, fn: SlessFunction | undefined): Promise<TriggerStatus> {
    // The controller owns its CronJobs by design: an edit by hand is taken back (drift repair).
    await apply(this.http, CRONJOB, cronJobFor(trigger, fn, this.registryMap), { force: true });
    if (trigger.spec.enabled === false || !fn) return { nextRun: undefined };
    const next = new Cron(trigger.spec.schedule ?? '', {
      paused: true,
      ...(trigger.spec.timezone ? { timezone: trigger.spec.timezone } : {}),
    }).nextRun();
    return { nextRun: next ? next.toISOString() : undefined };
  }

  async remove(namespace: string, name: string): Promise<void> {
    await deleteObject(this.http, CRONJOB, namespace, cronJobName(name));
  }
}
