/**
 * The kube platform's build history: one kaniko Job per build in the controller namespace, its pod, its
 * build context in S3 and its image in the registry; or, for a build the controller made itself as a
 * code layer, one record ConfigMap and its image. Garbage collection lists the Jobs here and removes
 * a build's pieces, the Job last: it is the record, so a removal cut short is finished by the next pass.
 */
import { DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { BuildArchive, FunctionRef, StoredBuild } from '../../../core/interfaces.js';
import { verdictConfigMapName } from '../code-verdicts.js';
import type { KubeHttp } from '../http.js';
import { jobCondition, jobFailed, jobStatus, jobSucceeded } from '../job-status.js';
import {
  ANNOTATION_BUILT_AT,
  ANNOTATION_COMMIT_FULL,
  ANNOTATION_DIGEST,
  ANNOTATION_IMAGE,
  LABEL_BUILD_KEY,
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_FUNCTION_NAMESPACE,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../labels.js';
import { deleteObject, type KubeObject, listObjects } from '../objects.js';
import { CONFIG_MAP, DEPLOYMENT, JOB, POD } from '../resource-types.js';
import { CodeLayerRecords, codeLayerRecordName } from './code-layer-records.js';
import { contextKeyOf, LABEL_BUILD } from './kaniko-job.js';
import type { RegistryClient } from './registry-client.js';

export interface KubeBuildArchiveOptions {
  http: KubeHttp;
  s3: S3Client;
  bucket: string;
  controllerNamespace: string;
  /** The namespaces this controller watches; undefined: all. Other namespaces' builds are not ours. */
  namespaces?: readonly string[];
  /** Set only when the operator enabled registry deletes (SLESS_REGISTRY_DELETE). */
  registry?: RegistryClient;
  logger: Logger;
}

interface PodLike extends KubeObject {
  spec?: { containers?: { image?: string }[]; template?: { spec?: { containers?: { image?: string }[] } } };
}

export class KubeBuildArchive implements BuildArchive {
  private readonly options: KubeBuildArchiveOptions;
  private readonly records: CodeLayerRecords;

  constructor(options: KubeBuildArchiveOptions) {
    this.options = options;
    this.records = new CodeLayerRecords(options.http, options.controllerNamespace);
  }

  /**
   * Images that run now: every function Deployment's template and every function pod, so an old
   * revision's pods that still serve during a rollout count too.
   */
  private async servingImages(scope: FunctionRef | undefined): Promise<Set<string>> {
    const labels = {
      [LABEL_COMPONENT]: 'function',
      [LABEL_MANAGED_BY]: MANAGED_BY,
      ...(scope ? { [LABEL_FUNCTION]: scope.name } : {}),
    };
    const images = new Set<string>();
    for (const namespace of scope ? [scope.namespace] : (this.options.namespaces ?? [undefined])) {
      const [deployments, pods] = await Promise.all([
        listObjects<PodLike>(this.options.http, DEPLOYMENT, { ...(namespace ? { namespace } : {}), labels }),
        listObjects<PodLike>(this.options.http, POD, { ...(namespace ? { namespace } : {}), labels }),
      ]);
      for (const d of deployments.items)
        for (const c of d.spec?.template?.spec?.containers ?? []) if (c.image) images.add(c.image);
      for (const p of pods.items) for (const c of p.spec?.containers ?? []) if (c.image) images.add(c.image);
    }
    return images;
  }

  async list(scope?: FunctionRef): Promise<StoredBuild[]> {
    const [jobs, serving, made] = await Promise.all([
      listObjects<KubeObject>(this.options.http, JOB, {
        namespace: this.options.controllerNamespace,
        labels: {
          [LABEL_COMPONENT]: 'build',
          [LABEL_MANAGED_BY]: MANAGED_BY,
          ...(scope ? { [LABEL_FUNCTION_NAMESPACE]: scope.namespace, [LABEL_FUNCTION]: scope.name } : {}),
        },
      }),
      this.servingImages(scope),
      this.records.list(scope),
    ]);
    const watched = this.options.namespaces ? new Set(this.options.namespaces) : undefined;
    const builds: StoredBuild[] = [];
    for (const job of jobs.items) {
      const labels = job.metadata.labels ?? {};
      const annotations = job.metadata.annotations ?? {};
      const namespace = labels[LABEL_FUNCTION_NAMESPACE];
      const name = labels[LABEL_FUNCTION];
      const buildKey = labels[LABEL_BUILD_KEY];
      if (!namespace || !name || !buildKey || (watched && !watched.has(namespace))) continue;
      const succeeded = jobSucceeded(job);
      const failed = !succeeded && jobFailed(job);
      const digest = annotations[ANNOTATION_DIGEST];
      const image =
        annotations[ANNOTATION_IMAGE] && digest ? `${annotations[ANNOTATION_IMAGE]}@${digest}` : undefined;
      const finishedAt = succeeded
        ? asMilliseconds(
            annotations[ANNOTATION_BUILT_AT] ??
              jobStatus(job).completionTime ??
              job.metadata.creationTimestamp,
          )
        : failed
          ? (jobCondition(job, 'Failed')?.lastTransitionTime ?? job.metadata.creationTimestamp)
          : undefined;
      builds.push({
        id: job.metadata.name,
        namespace,
        name,
        buildKey,
        ...(annotations[ANNOTATION_COMMIT_FULL] ? { commit: annotations[ANNOTATION_COMMIT_FULL] } : {}),
        ...(finishedAt ? { finishedAt } : {}),
        // A succeeded Job whose digest is not read yet is still being finished by its builder.
        running: (!succeeded && !failed) || (succeeded && !digest),
        serving: image !== undefined && serving.has(image),
        ...(image ? { image } : {}),
      });
    }
    // Builds the controller made itself from an earlier image: a record each, and no Job.
    for (const record of made) {
      if (watched && !watched.has(record.namespace)) continue;
      builds.push({
        id: record.id,
        namespace: record.namespace,
        name: record.name,
        buildKey: record.buildKey,
        commit: record.commit,
        finishedAt: record.builtAt,
        running: false,
        serving: serving.has(record.image),
        image: record.image,
      });
    }
    return builds;
  }

  async remove(build: StoredBuild, keep: readonly StoredBuild[]): Promise<void> {
    const { http, controllerNamespace } = this.options;
    // Two builds share an image digest or a context only in rare cases (the same bytes built twice, a
    // runtime bump at one commit); what a kept build still uses stays.
    const digest = build.image?.split('@')[1];
    if (this.options.registry && build.image && !keep.some((b) => b.image?.split('@')[1] === digest)) {
      const result = await this.options.registry.deleteImage(build.image);
      this.options.logger.debug({ image: build.image, result }, 'registry image deleted');
    }
    const sameContext = keep.some(
      (b) => b.namespace === build.namespace && b.name === build.name && b.commit === build.commit,
    );
    if (build.commit && !sameContext)
      await this.options.s3.send(
        new DeleteObjectCommand({
          Bucket: this.options.bucket,
          Key: contextKeyOf(build.namespace, build.name, build.commit),
        }),
      );
    // The code gate's verdict is kept per build key; once no kept build has the key, the code would be
    // built (and judged) anew anyway, and one ConfigMap per code version ever seen would pile up.
    if (!keep.some((b) => b.buildKey === build.buildKey))
      await deleteObject(http, CONFIG_MAP, controllerNamespace, verdictConfigMapName(build.buildKey));
    // Propagation deletes the pods where a garbage collector runs; they are deleted by name too, so
    // none is left where none runs.
    const pods = await listObjects<KubeObject>(http, POD, {
      namespace: controllerNamespace,
      labels: { [LABEL_BUILD]: build.id },
    });
    for (const pod of pods.items) await deleteObject(http, POD, controllerNamespace, pod.metadata.name);
    if (build.id === codeLayerRecordName(build.name, build.commit ?? ''))
      await deleteObject(http, CONFIG_MAP, controllerNamespace, build.id);
    else await deleteObject(http, JOB, controllerNamespace, build.id);
  }
}

/** One format for every time, so that history sorts as text (Kubernetes writes whole seconds). */
function asMilliseconds(time: string | undefined): string | undefined {
  if (!time) return undefined;
  const parsed = new Date(time);
  return Number.isNaN(parsed.getTime()) ? time : parsed.toISOString();
}
