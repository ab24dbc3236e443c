/**
 * FunctionJobs as Jobs: `run-{job}-{runId}` runs the function's image once in one-shot mode
 * (SLESS_EVENT set, result on the last stdout line). The name is the idempotency key, so a second
 * reconcile of the same run, or a restarted controller, attaches instead of starting another.
 */
import type { Logger } from 'pino';
import { timeoutSecOf } from '../../core/defaults.js';
import type { JobOutcome, JobRunner } from '../../core/interfaces.js';
import { boundedName } from '../../core/naming.js';
import type { BuildRecord, FunctionJob, SlessFunction } from '../../core/resources.js';
import { API_VERSION } from '../../core/schemas.js';
import { isStatus, type KubeHttp } from './http.js';
import { jobStatus } from './job-status.js';
import { LABEL_COMPONENT, LABEL_FUNCTION, LABEL_JOB, LABEL_MANAGED_BY, MANAGED_BY } from './labels.js';
import { getObject, type KubeObject, listObjects } from './objects.js';
import { readPodLog } from './pod-log.js';
import { PollReader } from './poll.js';
import { collectionPath, JOB, POD } from './resource-types.js';
import { resourcesFor, runtimeEnv, secretVolumes } from './workload-manifests.js';

const RESULT_PREFIX = 'SLESS_RESULT ';
const LABEL_RUN = 'sless.dev/run';

export function runJobName(job: string, runId: number): string {
  return boundedName(['run', job], String(runId));
}

export function runJobFor(
  job: FunctionJob,
  fn: SlessFunction,
  build: BuildRecord,
  imagePullSecrets: readonly string[],
): KubeObject {
  const runId = job.spec.runId ?? 0;
  const name = runJobName(job.metadata.name, runId);
  if (!job.metadata.uid) throw new Error(`functionjob ${job.metadata.name} has no uid`);
  const labels = {
    [LABEL_COMPONENT]: 'run',
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_FUNCTION]: fn.metadata.name,
    [LABEL_JOB]: job.metadata.name,
    [LABEL_RUN]: name,
  };
  const timeoutSec = timeoutSecOf(fn);
  // The same secret files as the function's pods, so a run reads what a request would.
  const secrets = secretVolumes(fn);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: job.metadata.namespace,
      labels,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: 'FunctionJob',
          name: job.metadata.name,
          uid: job.metadata.uid,
          controller: true,
        },
      ],
    },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: timeoutSec + 60,
      ttlSecondsAfterFinished: 86_400,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          ...(secrets.volumes ? { volumes: secrets.volumes } : {}),
          ...(imagePullSecrets.length > 0
            ? { imagePullSecrets: imagePullSecrets.map((n) => ({ name: n })) }
            : {}),
          containers: [
            {
              name: 'function',
              image: build.image,
              env: [...runtimeEnv(fn), { name: 'SLESS_EVENT', value: JSON.stringify(job.spec.event ?? {}) }],
              resources: resourcesFor(fn),
              ...(secrets.mounts ? { volumeMounts: secrets.mounts } : {}),
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    },
  };
}

export function parseResult(output: string): unknown {
  const line = output
    .split('\n')
    .reverse()
    .find((l) => l.startsWith(RESULT_PREFIX));
  if (!line) return undefined;
  try {
    return JSON.parse(line.slice(RESULT_PREFIX.length));
  } catch {
    return undefined;
  }
}

export class KubeJobRunner implements JobRunner {
  private readonly http: KubeHttp;
  private readonly logger: Logger;
  private readonly pollMs: number;
  private readonly imagePullSecrets: readonly string[];
  private readonly running = new Map<string, Promise<JobOutcome>>();
  private stopped = false;

  constructor(options: {
    http: KubeHttp;
    logger: Logger;
    pollMs?: number;
    imagePullSecrets?: readonly string[];
  }) {
    this.http = options.http;
    this.logger = options.logger;
    this.pollMs = options.pollMs ?? 2000;
    this.imagePullSecrets = options.imagePullSecrets ?? [];
  }

  /** Stops polling; runs in progress stay pending (the next controller attaches to their Jobs). */
  stop(): void {
    this.stopped = true;
  }

  run(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    const key = `${job.metadata.namespace}/${runJobName(job.metadata.name, job.spec.runId ?? 0)}`;
    let outcome = this.running.get(key);
    if (!outcome) {
      outcome = this.start(job, fn, build).finally(() => this.running.delete(key));
      this.running.set(key, outcome);
    }
    return outcome;
  }

  private async start(job: FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome> {
    const ns = job.metadata.namespace;
    const manifest = runJobFor(job, fn, build, this.imagePullSecrets);
    const name = manifest.metadata.name;
    try {
      await this.http.request('POST', collectionPath(JOB, ns), {
        body: manifest,
        query: { fieldManager: 'sless-controller' },
      });
    } catch (error) {
      if (!isStatus(error, 409)) throw error; // AlreadyExists: this run is under way, attach to it
    }
    const reader = new PollReader();
    for (;;) {
      const read = await reader.read(() => getObject<KubeObject>(this.http, JOB, ns, name));
      if (read === 'retry') {
        await new Promise((r) => setTimeout(r, this.pollMs));
        continue;
      }
      const current = read.value;
      if (!current) throw new Error(`run Job ${ns}/${name} disappeared`);
      const status = jobStatus(current);
      const done = status.conditions?.find(
        (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
      );
      if (done || (status.succeeded ?? 0) > 0 || (status.failed ?? 0) > 0) {
        const ok = done ? done.type === 'Complete' : (status.succeeded ?? 0) > 0;
        const { output, exitCode } = await this.podOutcome(ns, name);
        const result = parseResult(output);
        this.logger.info({ job: `${ns}/${job.metadata.name}`, run: name, ok }, 'run Job finished');
        return {
          phase: ok ? 'Succeeded' : 'Failed',
          startTime: status.startTime ?? current.metadata.creationTimestamp ?? new Date().toISOString(),
          completionTime: status.completionTime ?? done?.lastTransitionTime ?? new Date().toISOString(),
          ...(exitCode === undefined ? {} : { exitCode }),
          ...(result === undefined ? {} : { result }),
          ...(output ? { outputTail: output.slice(-4096) } : {}),
          message: ok
            ? `run ${job.spec.runId} succeeded`
            : `run ${job.spec.runId} failed${done?.message ? `: ${done.message}` : ''}`,
        };
      }
      await new Promise((r) => setTimeout(r, this.pollMs));
      if (this.stopped) return new Promise<JobOutcome>(() => {});
    }
  }

  /** The pod's exit code and log, when a kubelet is there to tell; both optional. */
  private async podOutcome(
    namespace: string,
    jobName: string,
  ): Promise<{ output: string; exitCode?: number }> {
    interface Pod extends KubeObject {
      status?: { containerStatuses?: { state?: { terminated?: { exitCode?: number } } }[] };
    }
    const pods = await listObjects<Pod>(this.http, POD, { namespace, labels: { [LABEL_RUN]: jobName } });
    const pod = pods.items[0];
    if (!pod) return { output: '' };
    const exitCode = pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
    let output = '';
    try {
      output = await readPodLog(this.http, namespace, pod.metadata.name, 'function', 200);
    } catch {
      // no kubelet to serve logs
    }
    return { output, ...(exitCode === undefined ? {} : { exitCode }) };
  }
}
