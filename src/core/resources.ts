/**
 * The objects sless works with, shaped like Kubernetes resources so that the local store and the
 * Kubernetes API hold the very same documents. Specs come from the JSON Schemas; status is ours.
 */

import type { Condition } from './conditions.js';
import type {
  FunctionJobSpec,
  FunctionSpec,
  GitSourceSpec,
  KindName,
  ObjectMetadata,
  TriggerSpec,
} from './schemas.js';

export const LABEL_SOURCE = 'sless.dev/source';
export const ANNOTATION_COMMIT = 'sless.dev/commit';
export const ANNOTATION_BUILD_KEY = 'sless.dev/build-key';
export const ANNOTATION_CONFIG_HASH = 'sless.dev/config-hash';
export const ANNOTATION_MANIFEST = 'sless.dev/manifest';
export const ANNOTATION_CODE_DIR = 'sless.dev/code-dir';
export const FIELD_MANAGER = 'sless-controller';

export interface Metadata extends ObjectMetadata {
  namespace: string;
  generation?: number;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
}

export interface Resource<K extends KindName, Spec, Status> {
  apiVersion: 'sless.dev/v1alpha1';
  kind: K;
  metadata: Metadata;
  spec: Spec;
  status?: Status;
}

export interface BaseStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  phase?: string;
}

export interface GitSourceStatus extends BaseStatus {
  lastSyncedCommit?: string;
  /** The first line of that commit's message, for people reading status. */
  lastSyncedMessage?: string;
  /** For `kubectl get` columns, which cannot cut strings. */
  shortCommit?: string;
  lastAttemptedCommit?: string;
  lastSyncTime?: string;
  objects?: number;
  /** The commit `spec.ref.commit` pins the source to, while it does; the branch head is then ignored. */
  pinnedCommit?: string;
  /** Each branch preview (spec.previews) that serves, in label order. */
  previews?: PreviewStatus[];
  /** Why some matching branches have no preview (two share a label, a commit was rejected); empty when none. */
  previewErrors?: string[];
}

export interface PreviewStatus {
  branch: string;
  /** The `@label` of its URLs. */
  label: string;
  commit: string;
  /** One `/fn/{ns}/{name}@{label}` per Function of the branch. */
  urls: string[];
}

/** The commit a source is pinned to, if any: what it serves instead of the branch head. */
export function pinnedCommitOf(source: GitSource): string | undefined {
  return source.spec.ref?.commit;
}

export type FunctionPhase =
  | 'Pending'
  | 'Building'
  | 'Deploying'
  | 'Ready'
  | 'ScaledToZero'
  | 'Failed'
  | 'Disabled';

/**
 * What the code security gate said about a build key: Passed and Refused are the endpoint's verdict;
 * Skipped (too much text, or none) and Unavailable (unreachable, slow, or a garbled answer) let the
 * build go on with this as the warning.
 */
export interface CodeCheck {
  result: 'Passed' | 'Refused' | 'Skipped' | 'Unavailable';
  message: string;
}

export interface BuildRecord {
  buildKey: string;
  commit: string;
  result: 'Succeeded' | 'Failed' | 'Running';
  startedAt: string;
  finishedAt?: string;
  durationMs?: number;
  message?: string;
  logTail?: string;
  image?: string;
  /** Present when the code security gate is on. */
  codeCheck?: CodeCheck;
}

export interface FunctionStatus extends BaseStatus {
  phase?: FunctionPhase;
  commit?: string;
  shortCommit?: string;
  buildKey?: string;
  image?: string;
  url?: string;
  /** The revision that serves traffic: buildKey + config hash of the running workload. */
  servingRevision?: string;
  servingCommit?: string;
  lastBuild?: BuildRecord;
  lastBuiltAt?: string;
  restarts?: number;
  /** The instances that run now (`desired`: what scaling asks for; `ready`: those that answer). */
  instances?: { desired: number; ready: number };
  lastError?: string;
  /** Local platform: whether it runs sandboxed and which limits hold, in plain words. */
  isolation?: string;
  /** What works but should change: a runtime past its end of life. */
  warnings?: string[];
  /** The canary rollout of the last new revision under `spec.rollout.canary`, with its figures. */
  canary?: CanaryStatus;
}

export interface CanaryStatus {
  /** The revision under test, and the one that keeps serving the rest of the requests. */
  revision: string;
  stableRevision: string;
  phase: 'Progressing' | 'Promoted' | 'RolledBack';
  /** Index into `steps`, and the new revision's share of requests now (percent). */
  step: number;
  weight: number;
  stepStartedAt: string;
  /** The new revision's answers in this step (for RolledBack: the step that breached). */
  figures?: { requests: number; errors: number; errorRate: number; p99Ms?: number };
  message?: string;
}

export interface TriggerStatus extends BaseStatus {
  url?: string;
  lastRun?: string;
  nextRun?: string;
  lastResult?: string;
  /** amqp: the consumer's state (connecting, consuming, paused, failed). */
  consumer?: string;
  /** amqp: when the last message arrived, and how it ended. */
  lastMessage?: string;
  lastError?: string;
  acknowledged?: number;
  deadLettered?: number;
}

export type JobPhase = 'Pending' | 'Skipped' | 'Running' | 'Succeeded' | 'Failed';

export interface FunctionJobStatus extends BaseStatus {
  phase?: JobPhase;
  observedRunId?: number;
  /** The build the run uses, fixed when it starts: a later change of the function does not move it. */
  buildKey?: string;
  startTime?: string;
  completionTime?: string;
  exitCode?: number;
  outputTail?: string;
  result?: unknown;
  message?: string;
}

export type GitSource = Resource<'GitSource', GitSourceSpec, GitSourceStatus>;
export type SlessFunction = Resource<'Function', FunctionSpec, FunctionStatus>;
export type Trigger = Resource<'Trigger', TriggerSpec, TriggerStatus>;
export type FunctionJob = Resource<'FunctionJob', FunctionJobSpec, FunctionJobStatus>;
export type AnyResource = GitSource | SlessFunction | Trigger | FunctionJob;
/** The resource type of a kind: `ResourceOf<'Function'>` is `SlessFunction`. */
export type ResourceOf<K extends KindName> = Extract<AnyResource, { kind: K }>;

export function isKind<K extends KindName>(object: AnyResource, kind: K): object is ResourceOf<K> {
  return object.kind === kind;
}

export interface ObjectRef {
  kind: KindName;
  namespace: string;
  name: string;
}

export function refOf(obj: AnyResource): ObjectRef {
  return { kind: obj.kind, namespace: obj.metadata.namespace, name: obj.metadata.name };
}

export function refKey(ref: ObjectRef): string {
  return `${ref.kind}/${ref.namespace}/${ref.name}`;
}
