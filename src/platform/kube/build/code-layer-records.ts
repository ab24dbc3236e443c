/**
 * The durable record of a build the controller made itself (code layer on an earlier image, no Job):
 * one ConfigMap per build in the controller's namespace, labelled as build Jobs are (function, its
 * namespace, build key, dependency key), so that lookup, history and garbage collection find it as they
 * find a Job. It holds names and digests only, never a credential.
 */
import { boundedName } from '../../../core/naming.js';
import type { BuildRecord, SlessFunction } from '../../../core/resources.js';
import { isStatus, type KubeHttp } from '../http.js';
import {
  ANNOTATION_BASE_IMAGE,
  ANNOTATION_BUILT_AT,
  ANNOTATION_COMMIT_FULL,
  ANNOTATION_DIGEST,
  ANNOTATION_IMAGE,
  LABEL_BUILD_KEY,
  LABEL_COMPONENT,
  LABEL_DEPENDENCY_KEY,
  LABEL_FUNCTION,
  LABEL_FUNCTION_NAMESPACE,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../labels.js';
import { getObject, type KubeObject, listObjects } from '../objects.js';
import { CONFIG_MAP, collectionPath } from '../resource-types.js';

/** The component label of these records (Jobs carry `build`). */
export const CODE_LAYER_COMPONENT = 'code-layer-build';
export const ANNOTATION_STARTED_AT = 'sless.dev/started-at';

export interface CodeLayerBuild {
  /** The ConfigMap's name. */
  id: string;
  namespace: string;
  name: string;
  buildKey: string;
  dependencyKey: string;
  commit: string;
  /** `tag@digest` */
  image: string;
  baseImage: string;
  startedAt: string;
  builtAt: string;
}

export function codeLayerRecordName(functionName: string, commit: string): string {
  return boundedName(['code', functionName], commit.slice(0, 12));
}

export class CodeLayerRecords {
  constructor(
    private readonly http: KubeHttp,
    private readonly namespace: string,
  ) {}

  /** This function's records; with `filter`, those of one build key or dependency key. */
  async list(
    fn: { namespace: string; name: string } | undefined,
    filter: { buildKey?: string; dependencyKey?: string } = {},
  ): Promise<CodeLayerBuild[]> {
    const maps = await listObjects<KubeObject>(this.http, CONFIG_MAP, {
      namespace: this.namespace,
      labels: {
        [LABEL_COMPONENT]: CODE_LAYER_COMPONENT,
        [LABEL_MANAGED_BY]: MANAGED_BY,
        ...(fn ? { [LABEL_FUNCTION]: fn.name, [LABEL_FUNCTION_NAMESPACE]: fn.namespace } : {}),
        ...(filter.buildKey ? { [LABEL_BUILD_KEY]: filter.buildKey } : {}),
        ...(filter.dependencyKey ? { [LABEL_DEPENDENCY_KEY]: filter.dependencyKey } : {}),
      },
    });
    return maps.items
      .filter((map) => !map.metadata.deletionTimestamp)
      .map(recordOf)
      .filter((r): r is CodeLayerBuild => r !== undefined)
      .sort((a, b) => b.builtAt.localeCompare(a.builtAt));
  }

  /** Stores a finished build; one already stored under the name (another replica's) stands. */
  async create(fn: SlessFunction, build: Omit<CodeLayerBuild, 'id' | 'namespace' | 'name'>): Promise<void> {
    const name = codeLayerRecordName(fn.metadata.name, build.commit);
    const [tag, digest] = build.image.split('@') as [string, string];
    try {
      await this.http.request('POST', collectionPath(CONFIG_MAP, this.namespace), {
        body: {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name,
            namespace: this.namespace,
            labels: {
              [LABEL_COMPONENT]: CODE_LAYER_COMPONENT,
              [LABEL_MANAGED_BY]: MANAGED_BY,
              [LABEL_FUNCTION]: fn.metadata.name,
              [LABEL_FUNCTION_NAMESPACE]: fn.metadata.namespace,
              [LABEL_BUILD_KEY]: build.buildKey,
              [LABEL_DEPENDENCY_KEY]: build.dependencyKey,
            },
            annotations: {
              [ANNOTATION_COMMIT_FULL]: build.commit,
              [ANNOTATION_IMAGE]: tag,
              [ANNOTATION_DIGEST]: digest,
              [ANNOTATION_BASE_IMAGE]: build.baseImage,
              [ANNOTATION_STARTED_AT]: build.startedAt,
              [ANNOTATION_BUILT_AT]: build.builtAt,
            },
          },
        },
      });
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
    }
  }

  async get(name: string): Promise<CodeLayerBuild | undefined> {
    const map = await getObject<KubeObject>(this.http, CONFIG_MAP, this.namespace, name);
    return map ? recordOf(map) : undefined;
  }
}

function recordOf(map: KubeObject): CodeLayerBuild | undefined {
  const labels = map.metadata.labels ?? {};
  const annotations = map.metadata.annotations ?? {};
  const [namespace, name, buildKey, dependencyKey] = [
    labels[LABEL_FUNCTION_NAMESPACE],
    labels[LABEL_FUNCTION],
    labels[LABEL_BUILD_KEY],
    labels[LABEL_DEPENDENCY_KEY],
  ];
  const [commit, tag, digest, builtAt] = [
    annotations[ANNOTATION_COMMIT_FULL],
    annotations[ANNOTATION_IMAGE],
    annotations[ANNOTATION_DIGEST],
    annotations[ANNOTATION_BUILT_AT],
  ];
  if (!namespace || !name || !buildKey || !dependencyKey || !commit || !tag || !digest || !builtAt)
    return undefined;
  return {
    id: map.metadata.name,
    namespace,
    name,
    buildKey,
    dependencyKey,
    commit,
    image: `${tag}@${digest}`,
    baseImage: annotations[ANNOTATION_BASE_IMAGE] ?? '',
    startedAt: annotations[ANNOTATION_STARTED_AT] ?? builtAt,
    builtAt,
  };
}

/** A record as the reconciler reads builds. */
export function buildRecordOf(build: CodeLayerBuild): BuildRecord {
  return {
    buildKey: build.buildKey,
    commit: build.commit,
    result: 'Succeeded',
    startedAt: build.startedAt,
    finishedAt: build.builtAt,
    durationMs: Math.max(0, Date.parse(build.builtAt) - Date.parse(build.startedAt)),
    message: `code layer on ${build.baseImage}, no Job`,
    image: build.image,
  };
}
