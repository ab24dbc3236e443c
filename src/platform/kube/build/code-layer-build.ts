/**
 * The code-layer fast path of the kube builder: for a tree whose dependency key matches an image
 * already in the registry, the controller makes the new image itself, with no Job and no tenant code
 * run: that image's manifest and config, its last layer (the code, as the kaniko Dockerfile lays it
 * out) replaced by the new commit's code, pushed through the registry API with the push credentials
 * and tagged with the commit. Anything about the base that is not as expected is a reason to build
 * with kaniko instead, never an error of the build.
 */
import type { Logger } from 'pino';
import { asError } from '../../../core/errors.js';
import type { BuildRequest } from '../../../core/interfaces.js';
import type { BuildRecord } from '../../../core/resources.js';
import { createCodeLayer } from '../../../packaging/code-layer.js';
import type { KubeHttp } from '../http.js';
import { IMAGE_LABEL_DEPENDENCY_KEY } from '../labels.js';
import { buildRecordOf, CodeLayerRecords } from './code-layer-records.js';
import { imageTag } from './kaniko-job.js';
import { type Descriptor, digestOf, RegistryApi } from './registry-api.js';
import { parseImage, type RegistryCredentials } from './registry-client.js';

/** What kaniko writes as the history of the Dockerfile's code COPY (see finalDockerfile). */
const CODE_COPY = 'COPY code/ /sless/code/';
/** Earlier images tried before giving up on the fast path. */
const MAX_CANDIDATES = 3;

export interface CodeLayerBuilderOptions {
  http: KubeHttp;
  controllerNamespace: string;
  /** `host[:port][/path]`, as SLESS_REGISTRY. */
  registry: string;
  insecure: boolean;
  credentials: () => Promise<RegistryCredentials | undefined>;
  logger: Logger;
}

export type CodeLayerOutcome = { record: BuildRecord } | { fallback: string };

interface ImageConfig {
  config?: { Labels?: Record<string, string> | null };
  rootfs?: { type?: string; diff_ids?: string[] };
  history?: { created_by?: string; empty_layer?: boolean }[];
}

/** Why a base image cannot take the code layer: the build goes to kaniko with this reason. */
class Unsuitable extends Error {}

export class CodeLayerBuilder {
  readonly records: CodeLayerRecords;
  private readonly options: CodeLayerBuilderOptions;
  private readonly host: string;

  constructor(options: CodeLayerBuilderOptions) {
    this.options = options;
    this.records = new CodeLayerRecords(options.http, options.controllerNamespace);
    this.host = options.registry.split('/')[0] ?? '';
  }

  /**
   * Builds `request` on the newest of `candidates` (images of this function built for the same
   * dependency key, newest first, `tag@digest`) and of this builder's own records that can take it.
   */
  async build(
    request: BuildRequest,
    dependencyKey: string,
    jobImages: readonly { image: string; builtAt: string }[],
  ): Promise<CodeLayerOutcome> {
    const startedAt = new Date().toISOString();
    const { fn } = request;
    const own = await this.records.list(
      { namespace: fn.metadata.namespace, name: fn.metadata.name },
      { dependencyKey },
    );
    const candidates = [...jobImages, ...own.map((r) => ({ image: r.image, builtAt: r.builtAt }))]
      .sort((a, b) => b.builtAt.localeCompare(a.builtAt))
      .map((c) => c.image)
      .filter((image, i, all) => all.indexOf(image) === i)
      .slice(0, MAX_CANDIDATES);
    if (candidates.length === 0)
      return { fallback: 'no earlier image of this function has these dependencies' };
    const reasons: string[] = [];
    const api = new RegistryApi({
      host: this.host,
      insecure: this.options.insecure,
      credentials: this.options.credentials,
    });
    for (const base of candidates) {
      try {
        const image = await this.onto(api, request, dependencyKey, base);
        const builtAt = new Date().toISOString();
        const build = {
          buildKey: request.buildKey,
          dependencyKey,
          commit: request.commit,
          image,
          baseImage: base,
          startedAt,
          builtAt,
        };
        await this.records.create(fn, build);
        return {
          record: buildRecordOf({
            ...build,
            id: '',
            namespace: fn.metadata.namespace,
            name: fn.metadata.name,
          }),
        };
      } catch (thrown) {
        const error = asError(thrown);
        // A broken tree (a link out of the function's directory) fails kaniko's build the same way.
        reasons.push(error instanceof Unsuitable ? error.message : `${base}: ${error.message}`);
        this.options.logger.info({ base, reason: error.message }, 'code layer: base image not used');
      }
    }
    return { fallback: reasons.join('; ') };
  }

  /** Pushes the new image onto `base`; returns it as `tag@digest`. */
  private async onto(
    api: RegistryApi,
    request: BuildRequest,
    dependencyKey: string,
    base: string,
  ): Promise<string> {
    const tag = imageTag(this.options.registry, request.fn, request.commit);
    const target = parseImage(`${tag}@sha256:${'0'.repeat(64)}`);
    const parsed = parseImage(base);
    if (!parsed || !target || parsed.host !== target.host || parsed.repository !== target.repository)
      throw new Unsuitable(`base image ${base} is not in ${target?.host}/${target?.repository}`);
    const repository = target.repository;
    const fetched = await api.manifest(repository, parsed.digest);
    if (!fetched) throw new Unsuitable(`base image ${base} is not in the registry`);
    const { manifest } = fetched;
    const config = JSON.parse(
      Buffer.from(await api.blob(repository, manifest.config.digest)).toString('utf8'),
    ) as ImageConfig;
    const label = config.config?.Labels?.[IMAGE_LABEL_DEPENDENCY_KEY];
    if (label !== dependencyKey)
      throw new Unsuitable(
        `base image ${base} holds dependencies ${label ? `for key ${label}` : 'of no recorded key'}, not ${dependencyKey}`,
      );
    const diffIds = config.rootfs?.diff_ids ?? [];
    const last = manifest.layers.at(-1);
    if (!last || diffIds.length !== manifest.layers.length)
      throw new Unsuitable(
        `base image ${base} has ${manifest.layers.length} layers but ${diffIds.length} diff_ids`,
      );
    // The base image's own history may be incomplete; what kaniko appended for its steps is not.
    const lastStep = (config.history ?? []).filter((h) => !h.empty_layer).at(-1)?.created_by ?? '';
    if (!lastStep.includes(CODE_COPY))
      throw new Unsuitable(`base image ${base}'s last layer is not its code (it comes from "${lastStep}")`);
    if (!/gzip/.test(last.mediaType))
      throw new Unsuitable(`base image ${base}'s code layer is ${last.mediaType}, not gzip`);

    const layer = await createCodeLayer(request);
    const newConfig = {
      ...config,
      rootfs: { ...config.rootfs, diff_ids: [...diffIds.slice(0, -1), layer.diffId] },
    };
    const configBytes = Buffer.from(JSON.stringify(newConfig));
    await api.pushBlob(repository, layer.blob, layer.digest);
    const configDigest = await api.pushBlob(repository, configBytes, digestOf(configBytes));
    const codeDescriptor: Descriptor = {
      mediaType: last.mediaType,
      digest: layer.digest,
      size: layer.blob.length,
    };
    const newManifest = {
      ...manifest,
      config: { ...manifest.config, digest: configDigest, size: configBytes.length },
      layers: [...manifest.layers.slice(0, -1), codeDescriptor],
    };
    const digest = await api.putManifest(
      repository,
      request.commit,
      Buffer.from(JSON.stringify(newManifest)),
      fetched.mediaType,
    );
    return `${tag}@${digest}`;
  }
}
