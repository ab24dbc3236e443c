/**
 * The ports between the core and its adapters. The core depends on these only; `main.ts` picks the
 * concrete local or Kubernetes implementations.
 */

import type { AnyResource, BuildRecord, ResourceOf, SlessFunction } from './resources.js';
import type { KindName } from './schemas.js';
import type { Reason } from './status.js';

export interface TreeFile {
  /** Repository-relative POSIX path. */
  path: string;
  /** Git file mode: 100644, 100755 or 120000 (symlink). */
  mode: string;
  oid: string;
}

/** A read-only view of the repository at one commit. Never a checkout. */
export interface SourceSnapshot {
  readonly commit: string;
  /** Every file below `dir` (repository-relative, '' or '.' for the root), sorted by path. */
  listFiles(dir: string): Promise<TreeFile[]>;
  /** `oid`, the blob id listFiles gave, saves resolving the path from the root tree again. */
  readFile(path: string, oid?: string): Promise<Uint8Array>;
  /** A file's size from the object header, before reading (and inflating) its content. */
  fileSize?(file: TreeFile): Promise<number | undefined>;
  /** The commit message's first line, where the snapshot is of a commit. */
  summary?(): Promise<string | undefined>;
}

export interface SourceReader {
  /** The commit the branch points at now. Cheap: for remotes it lists refs and fetches nothing. */
  resolveHead(): Promise<string>;
  /**
   * Makes the commit available (fetching it when remote) and returns a view of it. `branch` names the
   * branch it is fetched from when that is not the source's own (a preview's).
   */
  snapshot(commit: string, branch?: string): Promise<SourceSnapshot>;
  /** Every branch and its head, for previews. Cheap: for remotes it lists refs and fetches nothing. */
  listBranches?(): Promise<{ branch: string; commit: string }[]>;
  /**
   * True when `commit` is `head` or one of its ancestors, fetching history as needed: a pin may only
   * name a commit of the branch.
   */
  isOnBranch(commit: string, head: string): Promise<boolean>;
  /** Calls back when the branch may have moved (local repositories only); returns an unsubscribe. */
  watch?(onChange: () => void): () => void;
  /**
   * Starts nothing more; resolves once nothing writes into the reader's cache any longer, so that a
   * stopped controller leaves no fetch writing behind it.
   */
  close?(): Promise<void>;
}

export interface BuildRequest {
  fn: SlessFunction;
  buildKey: string;
  commit: string;
  /** Repository-relative directory holding the function's code. */
  codeDir: string;
  /** Files in codeDir that are sless manifests; they are not part of the build. */
  excludedFiles: ReadonlySet<string>;
  snapshot: SourceSnapshot;
  /**
   * Told what holds the build while it runs (a build pod that cannot pull its image, say), in words
   * for status, and undefined once nothing does. Optional: a builder may say nothing.
   */
  onProgress?: (note: string | undefined) => void;
}

export interface Builder {
  /** A finished build for this key, if one exists (successful builds are durable). */
  lookup(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined>;
  /** Builds once: concurrent calls for the same key share one build. Rejects with BuildError. */
  build(request: BuildRequest): Promise<BuildRecord>;
  /**
   * Forgets a failed build of this function's current build key, so the next build() runs it again
   * (the API's rebuild). Builders whose failures are durable (a failed kaniko Job) need it.
   */
  discardFailed?(fn: SlessFunction): Promise<void>;
  /**
   * The recorded failure of this build key, if the builder keeps failures across restarts; the
   * reconciler then reports it without trying the build again.
   */
  lookupFailed?(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined>;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  type: WatchEventType;
  object: AnyResource;
  /** Only status changed: controllers that act on spec ignore these, which is what stops loops. */
  statusOnly: boolean;
}

export interface ListOptions {
  namespace?: string;
  labels?: Record<string, string>;
}

/** Desired state plus status: in memory for `local`, custom resources for `kube`. */
export interface ObjectStore {
  get<K extends KindName>(kind: K, namespace: string, name: string): Promise<ResourceOf<K> | undefined>;
  list<K extends KindName>(kind: K, options?: ListOptions): Promise<ResourceOf<K>[]>;
  /** Server-side-apply semantics: the given metadata labels/annotations and spec become the object's. */
  apply(object: AnyResource): Promise<AnyResource>;
  patchStatus(object: AnyResource, status: object): Promise<void>;
  delete(kind: KindName, namespace: string, name: string): Promise<boolean>;
  /**
   * A deleting object's cleanup (its reconciler's finalize) is done: let it go. The kube store
   * removes sless's finalizer, and only from an object that is being deleted; a store that holds no
   * finalizers (local: a deletion is immediate) leaves this out.
   */
  releaseFinalizer?(kind: KindName, namespace: string, name: string): Promise<void>;
  subscribe(listener: (event: StoreEvent) => void): () => void;
  /**
   * The objects of `kind` that `keep` accepts, as the store's watches last saw them, without a request;
   * undefined where a store keeps no such cache (or has not listed yet). For reads that may lag a
   * moment behind a write: finding dependents, whose own events queue them again when they change.
   */
  cached?<K extends KindName>(
    kind: K,
    keep?: (object: ResourceOf<K>) => boolean,
  ): ResourceOf<K>[] | undefined;
}

export type RouteState =
  | {
      state: 'ready';
      origin: string;
      /** A unix socket to dial instead of the origin's host and port (a sandboxed local function). */
      socketPath?: string;
      /**
       * The revision behind the origin, when one address fronts every revision (a Service): a new
       * revision gets connections of its own, since a kept-alive one stays with the pod it reached.
       */
      revision?: string;
      timeoutSec: number;
      /** At most this many of the function's requests in flight, the next ones queued; absent: no limit. */
      admission?: AdmissionLimits;
      /**
       * The function's instances, each addressed directly: each request goes to the one this picks
       * when it is sent, and `origin` is the fallback when it picks none.
       */
      endpoints?: EndpointPicker;
      release?: () => void;
      /** Told each answer's status and latency, once per request (a canary's figures). */
      observe?: (statusCode: number, durationMs: number) => void;
    }
  | { state: 'unknown' }
  | UnavailableRoute;

/**
 * Picks one of a function's instances for one request (proxy/least-in-flight.ts); the request's
 * end is told with the origin it was given.
 */
export interface EndpointPicker {
  /** The origin for the next request; undefined when there is none to pick. */
  acquire(): string | undefined;
  /** A request `acquire` gave this origin has ended (once per acquired origin). */
  release(origin: string): void;
}

/** What a route says of its function's admission (see proxy/admission.ts). */
export interface AdmissionLimits {
  /** Requests in flight at once over all instances: `spec.scale.concurrency` × instances. */
  limit: number;
  /** Requests that may wait for a slot; beyond them, an immediate 503. */
  queue: number;
}

/** A function that exists but cannot serve now (disabled, restarting after a crash): an answer as is. */
export interface UnavailableRoute {
  state: 'unavailable';
  /** 404: the function exists, the revision asked for (`@commit`) does not, or no longer. */
  status: 404 | 502 | 503;
  message: string;
}

/** Where `/fn/{ns}/{name}` goes right now. */
export interface RouteResolver {
  /**
   * Resolves a route for one request. A ready route may carry `release`, which the proxy calls when
   * the request ends, so the platform can drain a revision before stopping it.
   */
  resolve(namespace: string, name: string): Promise<RouteState>;
}

/**
 * A route as another thread serves it. Ready: where to send requests and where to count them.
 * Unavailable: the answer the platform itself gives, so that a request whose function crashed under
 * it gets the same 502 from either thread instead of being handed on as a new request.
 */
export type MirroredRoute =
  | {
      state: 'ready';
      origin: string;
      socketPath?: string;
      timeoutSec: number;
      admission?: AdmissionLimits;
      /**
       * The serving revision behind an origin that fronts every revision (a Service): when it
       * changes, the proxy opens new connections, which reach the new pods (see FunctionProxy).
       */
      revision?: string;
      /**
       * The function's instances, addressed directly (a kube Service's ready endpoints): the thread
       * picks one per request, as the main thread does; absent or empty: `origin`.
       */
      endpoints?: readonly string[];
      /**
       * The revision's slot on the ActivityBoard the platform reads to drain, to scale to zero and to
       * autoscale; absent when nothing reads the function's counts (a kube function without `spec.scale`).
       */
      activitySlot?: number;
      /** A canary beside the serving revision: the thread gives it `weight` of every hundred requests. */
      canary?: MirroredCanary;
    }
  | UnavailableRoute;

/** A canary revision's share of a function's requests, as the proxies split them (kube). */
export interface MirroredCanary {
  revision: string;
  /** Percent of requests. */
  weight: number;
  /** When this share was set (ms since the epoch): answers are counted per share. */
  since: number;
  /** The canary's ready endpoints (never empty: without one, no canary route is given). */
  endpoints: readonly string[];
}

/**
 * Ready routes served outside the platform's own `resolve` too: by the gateway thread, which proxies
 * `/fn/` without the main thread. Whatever it has no route for, it hands to the main thread.
 */
export interface RouteMirror {
  /**
   * The function's route from now on; undefined: only the platform can answer (parked, starting,
   * removed, unknown).
   */
  publish(key: string, route: MirroredRoute | undefined): void;
  /**
   * Resolves once every change published so far applies where the routes are served: after it, no
   * new request reaches a route that was replaced, so a drain that starts then sees every request.
   */
  synced(): Promise<void>;
}

export type EventType = 'Normal' | 'Warning';

/**
 * Tells people what happened to an object (`kubectl describe`): syncs, builds, rollouts, prunes.
 * Fire and forget: a lost event never fails a reconcile.
 */
export interface EventRecorder {
  record(object: AnyResource, type: EventType, reason: Reason, message: string): void;
}

/** What a rollout is to reach. */
export interface DeployOptions {
  revision: string;
  enabled: boolean;
  /**
   * A keyed hash of the secret values the function references (never the values), set when it
   * references any: the kube pod template carries it, so a rotation rolls the pods.
   */
  secretsHash?: string;
}

/**
 * What a deleted Function leaves beyond its workload, where owner references cannot reach it (kube:
 * build Jobs in the controller namespace, build contexts in S3, registry images). Its reconciler runs
 * this before it releases the finalizer, so a cleanup that fails keeps the finalizer for the retry.
 */
export interface FunctionLeftovers {
  remove(namespace: string, name: string): Promise<void>;
}

/** Runs functions: processes for `local`, Deployments and Services for `kube`. */
export interface WorkloadPlatform {
  /** Rolls the function to this build; resolves once the new revision is serving (or rejects). */
  deploy(fn: SlessFunction, build: BuildRecord, options: DeployOptions): Promise<void>;
  /**
   * Called when the revision is already the current one: puts back what drifted from it (a workload
   * deleted or edited by hand) and resolves once it serves. Platforms that watch their own workloads
   * (local processes are restarted when they exit) leave it out.
   */
  ensure?(fn: SlessFunction, build: BuildRecord, options: DeployOptions): Promise<void>;
  /** Stops the function and removes its route. */
  remove(namespace: string, name: string): Promise<void>;
  /**
   * True while a function that scales to zero runs nothing (it still serves: the next request starts
   * it), false while it runs, undefined for a function that does not scale to zero. Platforms that do
   * not report it leave it out.
   */
  scaledToZero?(fn: SlessFunction): Promise<boolean | undefined>;
  /**
   * The revision serving now, if any. May be async: the kube platform reads it from the Deployment,
   * the durable record, rather than from a cache that could go stale.
   */
  currentRevision(namespace: string, name: string): string | undefined | Promise<string | undefined>;
  /**
   * What the platform sees of the function's serving revision, for its status: the platform tells
   * the controller when this changes (a crash) and never writes status itself. Platforms whose
   * workloads report this elsewhere (pods show their own restarts) leave it out.
   */
  observe?(fn: SlessFunction): WorkloadObservation | undefined;
  /** Canary rollouts (`spec.rollout.canary`); a platform without it rolls every revision out at once. */
  readonly canary?: CanaryControl;
}

/** A new revision beside the serving one, with a share of the requests, judged by its answers. */
export interface CanaryControl {
  /**
   * Starts `build` beside the serving revision and gives it `weight` percent of requests once it
   * answers /healthz. The serving revision keeps serving and stays recorded as what serves, so a
   * restart serves it alone until the canary is started again. Rejects with RolloutError.
   */
  start(fn: SlessFunction, build: BuildRecord, options: DeployOptions, weight: number): Promise<void>;
  /** The canary in progress now, if any, with the new revision's answers since its weight was set. */
  live(namespace: string, name: string): LiveCanary | undefined;
  /** A new share for the new revision; its figures start over. */
  setWeight(namespace: string, name: string, weight: number): void;
  /** The new revision takes every request and becomes what serves; the old one drains and stops. */
  promote(namespace: string, name: string): Promise<void>;
  /** Every request goes back to the serving revision; the new one drains and stops. */
  abort(namespace: string, name: string): Promise<void>;
}

export interface LiveCanary {
  revision: string;
  weight: number;
  /** False once the new revision's process (or pods) died. */
  alive: boolean;
  /** When its weight was last set (ms since the epoch): by its start, or by setWeight. */
  since: number;
  figures: import('./canary.js').AnswerFigures;
}

/** What a platform saw of a function's serving revision since it rolled out. */
/** Instances of a function: what its scaling wants now, and how many answer their health check. */
export interface FunctionInstances {
  desired: number;
  ready: number;
}

export interface WorkloadObservation {
  /** Crashes of the serving revision since it rolled out; undefined where the platform does not count them. */
  restarts?: number;
  /** The instances the platform runs for the function now, and how many of them are ready. */
  instances?: FunctionInstances;
  /** The last crash, with the end of its output. */
  lastCrash?: string;
  /** What holds the function in, said plainly. */
  isolation?: string;
}

/** Platform-specific pieces of source handling: where secrets live and where caches go. */
export interface SourceReaderFactory {
  create(source: import('./resources.js').GitSource): Promise<SourceReader>;
}

/**
 * Namespaces as the API sees them. Local mode keeps a set in memory; the kube platform creates the
 * Namespace with its image pull secret and NetworkPolicy. `ensureNamespace` is idempotent and safe
 * under concurrency: exactly one concurrent caller sees `true` (created).
 */
export interface NamespaceRegistry {
  namespaceExists(namespace: string): Promise<boolean>;
  /** Resolves true when this call created the namespace, false when it already existed. */
  ensureNamespace(namespace: string): Promise<boolean>;
}

export interface JobOutcome {
  phase: 'Succeeded' | 'Failed';
  startTime: string;
  completionTime: string;
  exitCode?: number;
  /** The handler's result (statusCode and body), when the run got that far. */
  result?: unknown;
  outputTail?: string;
  message?: string;
}

/** Runs a function once with an event (FunctionJobs): a one-shot process locally, a Job in a cluster. */
export interface JobRunner {
  /**
   * Idempotent per (job, runId): a second call for the same run attaches to it rather than starting
   * another. Resolves when the run has ended.
   */
  run(job: import('./resources.js').FunctionJob, fn: SlessFunction, build: BuildRecord): Promise<JobOutcome>;
}

/** Schedules cron Triggers: croner in process locally, CronJobs in a cluster. */
export interface TriggerScheduler {
  /**
   * Makes the schedule match the trigger: created, changed, or paused when disabled or when the
   * function is missing. Returns status fields to merge (nextRun, …).
   */
  apply(
    trigger: import('./resources.js').Trigger,
    fn: SlessFunction | undefined,
  ): Promise<import('./resources.js').TriggerStatus>;
  remove(namespace: string, name: string): Promise<void>;
}

/** One tenant process to start: a function, a one-off job or a build step. */
export interface LaunchSpec {
  command: string;
  args: string[];
  cwd: string;
  /** The whole environment of the process: nothing else is inherited. */
  env: Record<string, string>;
  stdio: ['pipe' | 'ignore', 'pipe', 'pipe'];
  /** The namespace the code belongs to: processes of different namespaces never share a uid. */
  tenant: string;
  /** Host paths the process may write (bound at the same path); nothing else is writable. */
  writable: string[];
  /** Host paths it may read besides the system's programs and libraries. */
  readable: string[];
  /**
   * Host directories shown read-only at another path inside (a function's secret files at their
   * mountPath). Only a sandbox can do that; a plain launch refuses a spec that has any.
   */
  mounts?: { source: string; target: string }[];
  /** `outbound`: internet access for package registries, but no host loopback. */
  network: 'none' | 'outbound';
  memoryMb?: number;
  maxProcesses?: number;
}

/** What the machine lets sless enforce on tenant processes, said plainly at start-up and in status. */
export interface IsolationReport {
  /** True when tenant processes run in a sandbox (namespaces, own uid, read-only system). */
  sandboxed: boolean;
  /** One line per guarantee, e.g. "memory: cgroup v1 memory.limit_in_bytes". */
  enforced: string[];
  /** One line per guarantee that does not hold here, with the reason. */
  notEnforced: string[];
}

/** Starts tenant processes: in a sandbox where the machine allows it, as plain children otherwise. */
export interface ProcessLauncher {
  readonly report: IsolationReport;
  /** Makes a directory tree (a build's staging directory, a socket directory) the tenant's to write. */
  grant(tenant: string, path: string): Promise<void>;
  /**
   * Starts the process. The returned child is the sandbox's outermost process: signals and exit
   * status reach through it; limits and helpers are released when it exits.
   */
  launch(spec: LaunchSpec): import('node:child_process').ChildProcess;
}

/** One build a platform keeps: a build directory locally; a kaniko Job, its context and image on kube. */
export interface StoredBuild {
  /** The platform's handle for it: the build directory, or the Job's name. */
  id: string;
  /** The function it was built for (which may no longer exist). */
  namespace: string;
  name: string;
  buildKey: string;
  /** The commit built, when known. */
  commit?: string;
  /** When it finished; history is ordered by it, newest first. Unset while it runs. */
  finishedAt?: string;
  /** Still building: never removed. */
  running: boolean;
  /** A workload runs this build now (or would again after a restart): never removed. */
  serving: boolean;
  /** What runs it: the image (`tag@digest`) on kube, the directory locally. */
  image?: string;
}

/**
 * The builds a platform keeps, for garbage collection past the history limit. Which builds go is the
 * core's decision (reconcile/build-gc.ts); the platform only lists and removes.
 */
/** One function, by namespace and name. */
export interface FunctionRef {
  namespace: string;
  name: string;
}

export interface BuildArchive {
  /**
   * Every build kept, of every function, including functions that no longer exist; with `scope`, only
   * that function's builds (one function's reconcile asks about its own history, and reading every
   * function's builds for it costs as much as the repository is large). Leftovers that no build owns
   * any more (staging directories of interrupted builds) are removed on the way.
   */
  list(scope?: FunctionRef): Promise<StoredBuild[]>;
  /** Removes one build and everything that belongs to it alone. */
  remove(build: StoredBuild, keep: readonly StoredBuild[]): Promise<void>;
}

/**
 * Where asynchronous invocations live between the 202 and their end: a journaled file in the state
 * directory locally; another backend on kube. Every write resolves only once it is durable, so the
 * 202 (and each attempt) is never ahead of what a restart finds.
 */
export interface InvocationStore {
  /** Creates or replaces the record; resolves once a restart would find it as given. */
  put(record: import('./invocations.js').InvocationRecord): Promise<void>;
  get(namespace: string, id: string): Promise<import('./invocations.js').InvocationRecord | undefined>;
  /** One namespace's records, newest first, optionally of one state. */
  list(
    namespace: string,
    options?: { state?: import('./invocations.js').InvocationState; limit?: number },
  ): Promise<import('./invocations.js').InvocationRecord[]>;
  /** Every record not in a final state, or final with a callback still to send: what workers resume. */
  unfinished(): Promise<import('./invocations.js').InvocationRecord[]>;
  /** Removes final records (dead letters excepted) last changed before `before`; returns how many. */
  sweep(before: string): Promise<number>;
  close(): Promise<void>;
}
