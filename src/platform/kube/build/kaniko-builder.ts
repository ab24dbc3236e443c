/**
 * Builder on Kubernetes: build context → S3 → one kaniko Job per (function, build key) → registry.
 *
 * Build once, since a build decided from anything less durable can repeat without end: a build is
 * identified by its build key, not by the commit that asked for it. Concurrent calls in this process
 * share one promise per key, and a Job of the key that already exists, at any commit (another
 * replica's, or this controller's before a restart, still running or finished), is attached to, never
 * duplicated; its image keeps the tag of the commit it was built at. Only a new Job's name derives
 * from function and commit. Whether a build exists is read from the Jobs themselves (label build-key,
 * condition Complete, digest annotation), durable state that no status writer can reset.
 */

import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Logger } from 'pino';
import { asError, BuildError, BuildFailedError } from '../../../core/errors.js';
import { sha256Hex } from '../../../core/hash.js';
import type { Builder, BuildRequest } from '../../../core/interfaces.js';
import { boundedName, buildName } from '../../../core/naming.js';
import { objectKey } from '../../../core/object-key.js';
import {
  ANNOTATION_BUILD_KEY,
  ANNOTATION_COMMIT,
  type BuildRecord,
  type SlessFunction,
} from '../../../core/resources.js';
import { createBuildContext } from '../../../packaging/build-context.js';
import { dependencyKeyOf } from '../../../packaging/dependency-inputs.js';
import { buildJobKey, type ChangeSignal } from '../change-signal.js';
import { isStatus, type KubeHttp, MERGE_PATCH } from '../http.js';
import { jobCondition, jobFailed, jobStatus, jobSucceeded } from '../job-status.js';
import {
  ANNOTATION_BUILT_AT,
  ANNOTATION_COMMIT_FULL,
  ANNOTATION_DIGEST,
  ANNOTATION_IMAGE,
  LABEL_BUILD_KEY,
  LABEL_DEPENDENCY_KEY,
  LABEL_FUNCTION,
  LABEL_FUNCTION_NAMESPACE,
} from '../labels.js';
import { getObject, type KubeObject, listObjects } from '../objects.js';
import { readPodLog } from '../pod-log.js';
import { PollReader } from '../poll.js';
import { JOB, objectPath, POD } from '../resource-types.js';
import type { CodeLayerBuilder } from './code-layer-build.js';
import { buildRecordOf } from './code-layer-records.js';
import {
  ANNOTATION_CODE_LAYER_SKIPPED,
  contextKey,
  INSTALL_CONTAINER,
  KANIKO_CONTAINER,
  type KanikoSettings,
  kanikoJob,
  LABEL_BUILD,
} from './kaniko-job.js';

export interface KanikoBuilderOptions extends KanikoSettings {
  http: KubeHttp;
  s3: S3Client;
  runtimesDir: string;
  logger: Logger;
  /**
   * How often a running Job is read: every `pollMs` (default 2 s), or with `changes`, when the build
   * watch sees its Job or pod move (and at least every CHANGE_FALLBACK_MS).
   */
  pollMs?: number;
  changes?: ChangeSignal;
  /** How long a succeeded Job may lack its pod's digest before the build counts as failed. */
  digestGraceMs?: number;
  onBuildFinished?: (record: BuildRecord, fn: SlessFunction) => void;
  /**
   * The code-layer fast path: a tree whose dependencies an earlier image of the function holds is
   * built by the controller itself, with no Job. Without it, every build is a kaniko Job.
   */
  codeLayer?: CodeLayerBuilder;
}

interface BuildContainerStatus {
  name: string;
  state?: {
    waiting?: { reason?: string; message?: string };
    terminated?: { exitCode?: number; message?: string; reason?: string; finishedAt?: string };
  };
}

interface PodObject extends KubeObject {
  status?: {
    initContainerStatuses?: BuildContainerStatus[];
    containerStatuses?: BuildContainerStatus[];
    /** Why the scheduler has not placed it, when it has not. */
    conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
  };
}

/** Waiting reasons that are a build's ordinary course, not something holding it. */
const ORDINARY_WAITS = new Set(['ContainerCreating', 'PodInitializing']);

/**
 * What holds a build's pod, from what the kubelet and the scheduler reported: a container waiting
 * for a reason other than its ordinary course (`ImagePullBackOff`, `CreateContainerConfigError`...),
 * or the pod not scheduled. Undefined while it runs as it should.
 */
export function buildPodHold(pod: PodObject): string | undefined {
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const container of statuses) {
    const waiting = container.state?.waiting;
    if (waiting?.reason && !ORDINARY_WAITS.has(waiting.reason))
      return `pod ${pod.metadata.name}, container ${container.name}: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`;
  }
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False')
    return `pod ${pod.metadata.name} not scheduled: ${scheduled.reason ?? 'Unschedulable'}${scheduled.message ? `: ${scheduled.message}` : ''}`;
  return undefined;
}

/** The image kaniko pushed, as its container's termination message reports it. */
interface PushedDigest {
  digest: string;
  /** When the kaniko container exited. */
  finishedAt?: string;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** With a build watch, a running Job is still read this often: a missed event costs no more. */
export const CHANGE_FALLBACK_MS = 15_000;

export class KanikoBuilder implements Builder {
  private readonly options: KanikoBuilderOptions;
  private readonly inFlight = new Map<string, Promise<BuildRecord>>();
  /** Build contexts being written to local staging directories, which stop() waits for. */
  private readonly writingContexts = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(options: KanikoBuilderOptions) {
    this.options = options;
  }

  async lookup(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    // A Job whose digest is recorded built its image, whether or not the Job controller has marked it
    // Complete yet (see waitFor).
    const done = (await this.listJobsOfKey(fn, buildKey))
      .filter(
        (job) => jobSucceeded(job) || (!jobFailed(job) && job.metadata.annotations?.[ANNOTATION_DIGEST]),
      )
      .sort((a, b) => (jobStatus(b).completionTime ?? '').localeCompare(jobStatus(a).completionTime ?? ''));
    for (const job of done) {
      const digest = job.metadata.annotations?.[ANNOTATION_DIGEST] ?? (await this.recordDigest(job))?.digest;
      if (digest) return this.recordOf(job, buildKey, digest);
    }
    return this.codeLayerBuildOf(fn, buildKey);
  }

  /** The newest build of this key that the code-layer path made, if any. */
  private async codeLayerBuildOf(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    const records = await this.options.codeLayer?.records.list(
      { namespace: fn.metadata.namespace, name: fn.metadata.name },
      { buildKey },
    );
    const [newest] = records ?? [];
    return newest ? buildRecordOf(newest) : undefined;
  }

  /**
   * Images that kaniko built for this function with the given dependency key, for the code-layer
   * path to start from.
   */
  private async kanikoImagesOf(
    fn: SlessFunction,
    dependencyKey: string,
  ): Promise<{ image: string; builtAt: string }[]> {
    const jobs = await listObjects<KubeObject>(this.options.http, JOB, {
      namespace: this.options.controllerNamespace,
      labels: {
        [LABEL_FUNCTION]: fn.metadata.name,
        [LABEL_FUNCTION_NAMESPACE]: fn.metadata.namespace,
        [LABEL_DEPENDENCY_KEY]: dependencyKey,
      },
    });
    const images: { image: string; builtAt: string }[] = [];
    for (const job of jobs.items) {
      const annotations = job.metadata.annotations ?? {};
      const digest = annotations[ANNOTATION_DIGEST];
      const tag = annotations[ANNOTATION_IMAGE];
      if (job.metadata.deletionTimestamp || jobFailed(job) || !digest || !tag) continue;
      const builtAt = annotations[ANNOTATION_BUILT_AT] ?? jobStatus(job).completionTime ?? '';
      images.push({ image: `${tag}@${digest}`, builtAt });
    }
    return images;
  }

  /**
   * Stops watching Jobs. Builds in progress stay pending for good rather than failing: the Jobs go on
   * in the cluster, and the next controller attaches to them, so a stopping controller must not write
   * "failed" into status on their behalf. A build context being written is let finish, so its
   * staging directory is removed before the process exits.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled(this.writingContexts);
  }

  build(request: BuildRequest): Promise<BuildRecord> {
    // Per build key, not per commit: an env-only commit asks for the code being built already.
    const key = `${request.fn.metadata.namespace}/${request.fn.metadata.name}@${request.buildKey}`;
    const running = this.inFlight.get(key);
    if (running) return running;
    const promise = this.buildOnce(request).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, promise);
    return promise;
  }

  /**
   * Forgets a failed build so it can run again (the API's rebuild): deletes its Job, at whatever
   * commit it ran (buildOnce would attach to a failed Job of the key at an earlier commit too).
   */
  async discardFailed(fn: SlessFunction): Promise<void> {
    const buildKey = fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
    const commit = fn.metadata.annotations?.[ANNOTATION_COMMIT];
    if (!buildKey || !commit) return;
    for (const job of await this.jobsOfKey(fn, buildKey))
      if (jobFailed(job))
        await this.options.http.request(
          'DELETE',
          objectPath(JOB, this.options.controllerNamespace, job.metadata.name),
          { body: { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' } },
        );
  }

  /** This function's build Jobs of one build key, at any commit, those being deleted included. */
  private async listJobsOfKey(fn: SlessFunction, buildKey: string): Promise<KubeObject[]> {
    const jobs = await listObjects<KubeObject>(this.options.http, JOB, {
      namespace: this.options.controllerNamespace,
      labels: {
        [LABEL_FUNCTION]: fn.metadata.name,
        [LABEL_FUNCTION_NAMESPACE]: fn.metadata.namespace,
        [LABEL_BUILD_KEY]: buildKey,
      },
    });
    return jobs.items;
  }

  /** This function's build Jobs of one build key, at any commit, but for those being deleted. */
  private async jobsOfKey(fn: SlessFunction, buildKey: string): Promise<KubeObject[]> {
    return (await this.listJobsOfKey(fn, buildKey)).filter((job) => !job.metadata.deletionTimestamp);
  }

  /**
   * The Job that builds (or built) this code already, at whatever commit: one still running or
   * succeeded before one that failed (a failed build is final for its code until a rebuild), then the
   * newest. After a controller restart this is what makes an env-only commit that arrived mid-build
   * wait for the build at the earlier commit instead of building the same code again.
   */
  private async existingBuild(
    fn: SlessFunction,
    buildKey: string,
  ): Promise<{ name: string; job: KubeObject } | undefined> {
    const jobs = await this.jobsOfKey(fn, buildKey);
    const rank = (job: KubeObject) => (jobFailed(job) ? 1 : 0);
    const [job] = jobs.sort(
      (a, b) =>
        rank(a) - rank(b) ||
        (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') ||
        a.metadata.name.localeCompare(b.metadata.name),
    );
    return job ? { name: job.metadata.name, job } : undefined;
  }

  /**
   * The build Job's name, and the Job if it exists: `build-{fn}-{sha12}`; when that name is taken by
   * another namespace's function or another build key (a runtime bump at the same commit), a name with
   * a short hash of both is used instead. The read that decides the name is the Job's read too.
   */
  private async jobFor(
    fn: SlessFunction,
    buildKey: string,
    commit: string,
  ): Promise<{ name: string; job: KubeObject | undefined }> {
    const ns = this.options.controllerNamespace;
    const name = buildName(fn.metadata.name, commit);
    const existing = await getObject<KubeObject>(this.options.http, JOB, ns, name);
    if (!existing || this.isOurs(existing, fn, buildKey)) return { name, job: existing };
    const salt = sha256Hex(`${fn.metadata.namespace}/${fn.metadata.name}/${buildKey}`).slice(0, 8);
    const salted = boundedName(['build', fn.metadata.name, commit.slice(0, 12)], salt);
    return { name: salted, job: await getObject<KubeObject>(this.options.http, JOB, ns, salted) };
  }

  private isOurs(job: KubeObject, fn: SlessFunction, buildKey: string): boolean {
    const labels = job.metadata.labels ?? {};
    return (
      labels[LABEL_FUNCTION] === fn.metadata.name &&
      labels[LABEL_FUNCTION_NAMESPACE] === fn.metadata.namespace &&
      labels[LABEL_BUILD_KEY] === buildKey
    );
  }

  private async buildOnce(request: BuildRequest): Promise<BuildRecord> {
    const { fn, buildKey, commit } = request;
    const ns = this.options.controllerNamespace;
    const log = this.options.logger.child({
      function: objectKey(fn.metadata.namespace, fn.metadata.name),
      buildKey,
    });
    const startedAt = new Date().toISOString();
    const made = await this.codeLayerBuildOf(fn, buildKey);
    if (made) return made;
    const found = (await this.existingBuild(fn, buildKey)) ?? (await this.jobFor(fn, buildKey, commit));
    const name = found.name;
    let job = found.job;
    try {
      if (job) {
        log.info({ job: name }, 'attaching to the existing build Job');
      } else {
        const dependencies = await dependencyKeyOf(request);
        const dependencyKey = 'key' in dependencies ? dependencies.key : undefined;
        let skipped = 'refused' in dependencies ? dependencies.refused : undefined;
        if (this.options.codeLayer && dependencyKey) {
          const outcome = await this.options.codeLayer.build(
            request,
            dependencyKey,
            await this.kanikoImagesOf(fn, dependencyKey),
          );
          if ('record' in outcome) {
            log.info({ image: outcome.record.image }, 'built as a code layer, no Job');
            this.options.onBuildFinished?.(outcome.record, fn);
            return outcome.record;
          }
          skipped = outcome.fallback;
        }
        if (this.options.codeLayer && skipped) log.info({ reason: skipped }, 'building with kaniko');
        const writing = createBuildContext({
          runtime: fn.spec.runtime,
          runtimesDir: this.options.runtimesDir,
          snapshot: request.snapshot,
          codeDir: request.codeDir,
          excludedFiles: request.excludedFiles,
        });
        this.writingContexts.add(writing);
        const context = await writing.finally(() => this.writingContexts.delete(writing));
        await this.options.s3.send(
          new PutObjectCommand({
            Bucket: this.options.bucket,
            Key: contextKey(fn, commit),
            Body: context.archive,
            ContentType: 'application/gzip',
          }),
        );
        // The install step fetches the context with this URL alone: one object, read-only, expiring
        // after the Job's deadline. No S3 key enters the build pod.
        const contextUrl = await getSignedUrl(
          this.options.s3,
          new GetObjectCommand({ Bucket: this.options.bucket, Key: contextKey(fn, commit) }),
          { expiresIn: (this.options.deadlineSeconds ?? 1800) + 600 },
        );
        try {
          job = await this.options.http.request<KubeObject>('POST', `/apis/batch/v1/namespaces/${ns}/jobs`, {
            body: kanikoJob(this.options, {
              name,
              fn,
              commit,
              buildKey,
              contextUrl,
              ...(dependencyKey ? { dependencyKey } : {}),
              ...(this.options.codeLayer && skipped ? { codeLayerSkipped: skipped } : {}),
            }),
            query: { fieldManager: 'sless-controller' },
          });
          log.info({ job: name, files: context.entries.length }, 'build Job created');
        } catch (error) {
          // Another reconcile or replica created it first: that build is ours too.
          if (!isStatus(error, 409)) throw error;
          log.info({ job: name }, 'build Job already exists; attaching');
          job = await getObject<KubeObject>(this.options.http, JOB, ns, name);
        }
      }
      const record = await this.waitFor(name, buildKey, startedAt, request.onProgress);
      this.options.onBuildFinished?.(record, fn);
      return record;
    } catch (thrown) {
      const error = asError(thrown);
      // A failed Job keeps its own times, so attaching to it again (after a controller restart)
      // reports the very same build, not a new one that failed just now.
      const started = (error instanceof JobFailedError && error.startedAt) || startedAt;
      const finished = (error instanceof JobFailedError && error.finishedAt) || new Date().toISOString();
      const record: BuildRecord = {
        buildKey,
        // The commit the failed Job built, which an attach at a later commit of the same code reports.
        commit: job?.metadata.annotations?.[ANNOTATION_COMMIT_FULL] ?? commit,
        result: 'Failed',
        startedAt: started,
        finishedAt: finished,
        durationMs: Math.max(0, Date.parse(finished) - Date.parse(started)),
        message: error.message,
        logTail: error instanceof BuildError ? error.logTail : '',
      };
      log.warn({ err: error.message }, 'build failed');
      this.options.onBuildFinished?.(record, fn);
      // A failed Job is final for this code; S3, the API or a vanished Job may pass on retry.
      if (error instanceof BuildError) throw new BuildFailedError(record, error);
      throw error;
    }
  }

  private async waitFor(
    name: string,
    buildKey: string,
    startedAt: string,
    onProgress: ((note: string | undefined) => void) | undefined,
  ): Promise<BuildRecord> {
    const ns = this.options.controllerNamespace;
    const poll = this.options.pollMs ?? 2000;
    let succeededSince: number | undefined;
    const reader = new PollReader();
    for (;;) {
      // Asked before the read: a change between the read and the wait must not wait for the fallback.
      const moved = this.options.changes?.next(buildJobKey(name), CHANGE_FALLBACK_MS);
      const read = await reader.read(() => getObject<KubeObject>(this.options.http, JOB, ns, name));
      if (read === 'retry') {
        await new Promise((r) => setTimeout(r, poll));
        continue;
      }
      const job = read.value;
      // Not a verdict on the code: the retry creates the Job again.
      if (!job) throw new Error(`build Job ${ns}/${name} disappeared`);
      if (jobSucceeded(job)) {
        const digest =
          job.metadata.annotations?.[ANNOTATION_DIGEST] ?? (await this.recordDigest(job))?.digest;
        if (digest) return this.recordOf(job, buildKey, digest, startedAt);
        // The Job can report success a moment before its pod's status carries the message.
        succeededSince ??= Date.now();
        if (Date.now() - succeededSince > (this.options.digestGraceMs ?? 30_000))
          throw new BuildError(`build Job ${name} succeeded but reported no image digest`, '');
      } else if (!jobFailed(job)) {
        // Once kaniko exited 0 with the digest it pushed, the image is in the registry: the Job
        // controller marks the Job Complete only a second or two later, after the pod's status
        // reached it, and the rollout need not wait for that.
        const pods = this.ownPods(job, await this.buildPods(name));
        const pushed = await this.recordDigest(job, { exitedZero: true, pods });
        if (pushed) return this.recordOf(job, buildKey, pushed.digest, startedAt, pushed.finishedAt);
        // Told on every read; only a change of it reaches status.
        onProgress?.(pods.map(buildPodHold).find((hold) => hold !== undefined));
      } else {
        const reason = jobCondition(job, 'Failed');
        const logTail = await this.logTail(name);
        throw new JobFailedError(
          `build Job ${name} failed: ${reason?.message ?? reason?.reason ?? 'kaniko exited with an error'}`,
          logTail,
          jobStatus(job).startTime ?? job.metadata.creationTimestamp,
          reason?.lastTransitionTime,
        );
      }
      await (moved ?? new Promise((r) => setTimeout(r, poll)));
      if (this.stopped) return new Promise<BuildRecord>(() => {});
    }
  }

  /**
   * Reads the digest kaniko wrote to /dev/termination-log and keeps it on the Job, which outlives pods.
   * `exitedZero`: only from a kaniko container that exited 0 (for a Job not yet marked Complete).
   */
  private async recordDigest(
    job: KubeObject,
    options: { exitedZero?: boolean; pods?: PodObject[] } = {},
  ): Promise<PushedDigest | undefined> {
    const pods = options.pods ?? this.ownPods(job, await this.buildPods(job.metadata.name));
    for (const pod of pods) {
      const terminated = pod.status?.containerStatuses?.find((c) => c.name === KANIKO_CONTAINER)?.state
        ?.terminated;
      if (options.exitedZero && terminated?.exitCode !== 0) continue;
      const message = terminated?.message?.trim();
      if (message && DIGEST.test(message)) {
        await this.options.http.request(
          'PATCH',
          objectPath(JOB, this.options.controllerNamespace, job.metadata.name),
          {
            body: {
              metadata: {
                annotations: {
                  [ANNOTATION_DIGEST]: message,
                  [ANNOTATION_BUILT_AT]: new Date().toISOString(),
                },
              },
            },
            contentType: MERGE_PATCH,
          },
        );
        return { digest: message, ...(terminated?.finishedAt ? { finishedAt: terminated.finishedAt } : {}) };
      }
    }
    return undefined;
  }

  /** A pod left from an earlier Job of the same name (a discarded failure) is not this build's. */
  private ownPods(job: KubeObject, pods: PodObject[]): PodObject[] {
    return pods.filter((pod) => {
      const owner = pod.metadata.labels?.['batch.kubernetes.io/controller-uid'];
      return !(owner && job.metadata.uid && owner !== job.metadata.uid);
    });
  }

  private async buildPods(jobName: string): Promise<PodObject[]> {
    const list = await listObjects<PodObject>(this.options.http, POD, {
      namespace: this.options.controllerNamespace,
      labels: { [LABEL_BUILD]: jobName },
    });
    return list.items;
  }

  private async logTail(jobName: string): Promise<string> {
    try {
      for (const pod of await this.buildPods(jobName)) {
        // A failed dependency install stops the pod before kaniko starts: its log is the install's.
        const logs: string[] = [];
        for (const container of [INSTALL_CONTAINER, KANIKO_CONTAINER]) {
          const text = await readPodLog(
            this.options.http,
            this.options.controllerNamespace,
            pod.metadata.name,
            container,
            60,
          ).catch(() => '');
          if (text) logs.push(`[${container}]\n${text}`);
        }
        if (logs.length > 0) return logs.join('\n').slice(-8000);
      }
    } catch {
      // No kubelet reachable or the pod is gone: the Job's condition message has to do.
    }
    return '';
  }

  private recordOf(
    job: KubeObject,
    buildKey: string,
    digest: string,
    startedAt?: string,
    pushedAt?: string,
  ): BuildRecord {
    const status = jobStatus(job);
    const started =
      status.startTime ?? startedAt ?? job.metadata.creationTimestamp ?? new Date().toISOString();
    const finished = status.completionTime ?? pushedAt ?? new Date().toISOString();
    const tag = job.metadata.annotations?.[ANNOTATION_IMAGE] ?? '';
    const skipped = job.metadata.annotations?.[ANNOTATION_CODE_LAYER_SKIPPED];
    return {
      ...(skipped ? { message: `built with kaniko: ${skipped}` } : {}),
      buildKey,
      commit: job.metadata.annotations?.[ANNOTATION_COMMIT_FULL] ?? '',
      result: 'Succeeded',
      startedAt: started,
      finishedAt: finished,
      durationMs: Math.max(0, Date.parse(finished) - Date.parse(started)),
      // Tag for people, digest for the kubelet: the exact bytes that were built, never a stale cache.
      image: `${tag}@${digest}`,
    };
  }
}

/** A build Job that failed, with the times the Job itself recorded. */
class JobFailedError extends BuildError {
  readonly startedAt: string | undefined;
  readonly finishedAt: string | undefined;
  constructor(message: string, logTail: string, startedAt?: string, finishedAt?: string) {
    super(message, logTail);
    this.startedAt = startedAt;
    this.finishedAt = finishedAt;
  }
}
