/**
 * Cron Triggers as CronJobs in the function's namespace: each run POSTs the trigger's event with a
 * pinned curl image, as an HTTP caller would. A function that runs all the time is called at its
 * Service. A function that scales to zero is called through the controller's `/fn/` (the activator):
 * at zero its Service has no endpoint to answer, while `/fn/` holds the call, scales the function up
 * once and delivers it, and counts it as activity so the function is not scaled down under it.
 * Disabled triggers suspend the CronJob in place. The curl image goes through the registry map of the
 * builds: a cluster that pulls base images from a mirror cannot pull curl from its origin either.
 */
import { Cron } from 'croner';
import { DEFAULT_TIMEOUT_SEC, timeoutSecOf } from '../../core/defaults.js';
import { sha256Hex } from '../../core/hash.js';
import type { TriggerScheduler } from '../../core/interfaces.js';
import { functionPath } from '../../core/naming.js';
import type { SlessFunction, Trigger, TriggerStatus } from '../../core/resources.js';
import { API_VERSION } from '../../core/schemas.js';
import { mirroredImage } from './build/kaniko-job.js';
import type { KubeHttp } from './http.js';
import { LABEL_COMPONENT, LABEL_FUNCTION, LABEL_MANAGED_BY, LABEL_TRIGGER, MANAGED_BY } from './labels.js';
import { apply, deleteObject, type KubeObject } from './objects.js';
import { CRONJOB } from './resource-types.js';
import { serviceOrigin } from './routes.js';
import { idleSecondsOf } from './scaler.js';

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

/** The controller's `/fn/` as pods reach it, and how long it holds a call while a function starts. */
export interface Activator {
  url: string;
  timeoutMs: number;
}

export interface CronJobOptions {
  registryMap?: readonly string[];
  /** Without it, every call goes to the function's Service. */
  activator?: Activator;
}

/** Where a run POSTs, and how long the call may take before curl gives up. */
function callTarget(
  namespace: string,
  functionName: string,
  fn: SlessFunction | undefined,
  activator: Activator | undefined,
): { url: string; maxTimeSec: number } {
  const timeoutSec = fn ? timeoutSecOf(fn) : DEFAULT_TIMEOUT_SEC;
  if (fn && activator && idleSecondsOf(fn) !== undefined)
    return {
      url: `${activator.url}${functionPath(namespace, functionName)}/`,
      maxTimeSec: timeoutSec + Math.ceil(activator.timeoutMs / 1000) + 5,
    };
  return { url: `${serviceOrigin(namespace, functionName)}/`, maxTimeSec: timeoutSec + 5 };
}

export function cronJobFor(
  trigger: Trigger,
  fn: SlessFunction | undefined,
  options: CronJobOptions = {},
): KubeObject {
  const { namespace, name } = trigger.metadata;
  if (!trigger.metadata.uid) throw new Error(`trigger ${name} has no uid; read it from the API first`);
  const target = callTarget(namespace, trigger.spec.function, fn, options.activator);
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
          activeDeadlineSeconds: target.maxTimeSec + 25,
          template: {
            metadata: { labels },
            spec: {
              restartPolicy: 'Never',
              automountServiceAccountToken: false,
              containers: [
                {
                  name: 'invoke',
                  image: mirroredImage(CURL_IMAGE, options.registryMap ?? []),
                  args: [
                    '-sS',
                    '--fail-with-body',
                    '--max-time',
                    String(target.maxTimeSec),
                    '-X',
                    'POST',
                    '-H',
                    'content-type: application/json',
                    '-H',
                    `x-sless-trigger: ${name}`,
                    '--data',
                    JSON.stringify(trigger.spec.event ?? {}),
                    target.url,
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
  private readonly cronJobOptions: CronJobOptions;

  constructor(options: { http: KubeHttp } & CronJobOptions) {
    const { http, ...cronJobOptions } = options;
    this.http = http;
    this.cronJobOptions = cronJobOptions;
  }

  async apply(trigger: Trigger, fn: SlessFunction | undefined): Promise<TriggerStatus> {
    // The controller owns its CronJobs by design: an edit by hand is taken back (drift repair).
    await apply(this.http, CRONJOB, cronJobFor(trigger, fn, this.cronJobOptions), { force: true });
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
