/**
 * The platform contract: the behaviour users rely on from a push to what /fn/ serves, run the same
 * way against every platform (local.test.ts, kube.test.ts). A platform is driven through a small
 * PlatformUnderTest: commit, sync, read and apply objects, call /fn/ and the API, and play what the
 * platform leaves to others (kaniko, the kubelet) where there is nobody to play it. Each case
 * deploys functions of its own, so one failing case does not take the others with it.
 *
 * Golden values are the status fields a user reads (phase, conditions, commit, revision). "Nothing
 * else happened" is checked after a positive signal (a settled controller, a later run that
 * finished), never after a sleep, and nothing here is timed.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { isDeepStrictEqual } from 'node:util';
import amqp, { type GetMessage } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../src/core/conditions.js';
import type {
  FunctionJob,
  GitSource,
  SlessFunction,
  Trigger,
  TriggerStatus,
} from '../../src/core/resources.js';
import {
  type ChatCompletionsServer,
  sentCode,
  startChatCompletionsServer,
} from '../helpers/chat-completions-server.js';
import { tempDir } from '../helpers/git.js';
import { pollUntil } from '../helpers/poll-until.js';
import { drainQueue, type RabbitMq, startRabbitMq } from '../helpers/rabbitmq.js';
import { ageKey, SOPS, secretYaml, sopsEncrypt } from '../helpers/sops.js';

/** An asynchronous invocation as the API shows it. */
interface InvocationView {
  id: string;
  state: string;
  attempts: { status?: number }[];
  result?: { status: number; body: string };
}

/** A request with a tagged body that reached a handler written with `answers`, and its attempt. */
export interface Delivery {
  tag: string;
  attempt: number;
}

/** What /fn/{ns}/{name} answered; a JSON body is parsed, any other is the text. */
export interface Served {
  status: number;
  body: unknown;
}

/** What a response answered, as `Served`. */
export async function served(response: Response): Promise<Served> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: the text is the body.
  }
  return { status: response.status, body };
}

export interface PlatformUnderTest {
  /** The namespace the platform's GitSource and functions live in. */
  readonly namespace: string;
  /** The name of that GitSource. */
  readonly sourceName: string;
  /**
   * Env the contract gives a function whose job runs (`jobRuns`) or starts (`starts`) this platform
   * counts from what the function writes (local: RUN_LOG); empty where the platform counts otherwise.
   */
  readonly countingEnv: Record<string, string>;
  /** Writes (null deletes a file or directory) and commits on the source's branch, where the platform reads it. */
  commit(files: Record<string, string | null>): Promise<string>;
  /**
   * Pushes `branch` with a tree of exactly `files` and a history of its own (not main's), or deletes
   * it (null); returns the commit. The source previews the branches `PREVIEW_BRANCHES` matches.
   */
  pushBranch(branch: string, files: Record<string, string> | null): Promise<string | undefined>;
  /** Makes the platform read the branch now, as a webhook would, and returns once that sync applied it. */
  sync(options?: { force?: boolean }): Promise<void>;
  source(): Promise<GitSource | undefined>;
  fn(name: string): Promise<SlessFunction | undefined>;
  trigger(name: string): Promise<Trigger | undefined>;
  job(name: string): Promise<FunctionJob | undefined>;
  /**
   * Applies a FunctionJob outside git, as `kubectl apply` or the API would (a commit is refused when
   * one of its FunctionJobs names a function the repository does not define); null deletes it.
   */
  applyJob(name: string, job: FunctionJob['spec'] | null): Promise<void>;
  /** GET /fn/{namespace}/{name}, through the platform's own proxy. */
  call(name: string): Promise<Served>;
  /** A request to the platform's HTTP API (`path` from /v1/…), with a JSON body when one is given. */
  api(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Served>;
  /** A namespace other than `namespace` where `setSecret` may put a Secret, for the functions of `namespace` not to see. */
  readonly otherNamespace: string;
  /**
   * Makes the Secret `name` hold exactly these keys, as its owner would (kube: the Secret object;
   * local: the secrets store, through its API), in `namespace` unless another is named.
   */
  setSecret(name: string, data: Record<string, string>, namespace?: string): Promise<void>;
  /** Every line sless logged so far (at debug level). */
  logged(): string;
  /**
   * Everything the platform keeps, outside its secrets store, that someone other than a function
   * may read (local: the state directory; kube: the objects the controller writes and its Events).
   */
  stored(): Promise<string>;
  /** Lets the build of `name` at `commit` succeed (kube: plays kaniko; local: the build runs by itself). */
  finishBuild(name: string, commit: string): Promise<void>;
  /**
   * Lets the build of `name` at `commit` fail, the contract having committed code that does not
   * install (a broken package.json); a build asked for again fails again. Returns words the build's
   * failure message contains.
   */
  failBuild(name: string, commit: string): Promise<string>;
  /**
   * How the next revisions of `name` come up: `crashLoop` when the contract committed a handler that
   * throws at start (kube: plays crash-looping pods; local: the handler crashes by itself). Returns
   * words the RolloutFailed message contains.
   */
  rollouts(name: string, outcome: 'available' | 'crashLoop'): Promise<string>;
  /**
   * Builds of `name` the platform keeps (succeeded or failed): one per build that ran, until the
   * build history limit removes the oldest.
   */
  builds(name: string): Promise<number>;
  /** Finished builds kept per function besides those serving or pinned (`SLESS_BUILD_HISTORY`). */
  readonly buildHistory: number;
  /** Nothing of the function is left on the platform: no object (finalizers ran), no workload, no builds. */
  workloadGone(name: string): Promise<boolean>;
  /** Lets run `runId` of FunctionJob `job` end (kube: plays the Job controller; local: it ends by itself). */
  finishJobRun(job: string, runId: number): Promise<void>;
  /**
   * Lets run `runId` of FunctionJob `job` fail, the contract having given it an event its function
   * throws on (kube: plays the Job controller giving up; local: the run fails by itself). Returns words
   * the FunctionJob's failure message contains.
   */
  failJobRun(job: string, runId: number): Promise<string>;
  /** Times the FunctionJob `job` ran its function (a run started again counts again). */
  jobRuns(job: string): Promise<number>;
  /**
   * Instances of `name` running now (local: its runtime process, none while parked; kube: the pods
   * played for its Deployment, which the played EndpointSlice lists once they run).
   */
  running(name: string): Promise<number>;
  /**
   * Instances of `name` started so far, by a rollout or a request (local: the starts its handler, written
   * with `instance`, logged; kube: the pods the played kubelet made for its Deployment).
   */
  starts(name: string): Promise<number>;
  /**
   * Requests that reached the handler of `name`, written with `hold`, and were held there so far
   * (local: the lines that handler logged; kube: the requests the stand-in pods hold).
   */
  held(name: string): Promise<number>;
  /**
   * Requests whose body carried a `tag` that reached the handler of `name`, written with `answers`, in
   * the order they came, each with its attempt (x-sless-attempt): local, the lines that handler logged
   * to RUN_LOG; kube, the requests the stand-in pods answered.
   */
  deliveries(name: string): Promise<Delivery[]>;
  /**
   * Lets every request the handlers written with `hold` hold answer, and those that come later answer
   * at once (local: the gate file beside RUN_LOG, which every such handler waits for).
   */
  release(name: string): Promise<void>;
  /**
   * Resolves once the platform's autoscaler has looked at the load, pass by pass, for at least `ms`
   * more: long enough, given a function's stable window, for it to have acted on the load as it is.
   */
  autoscalerWatched(ms: number): Promise<void>;
  /** Resolves once the controller has nothing queued or running (no reconcile, build or rollout). */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

/** The contract's cases, by the id a platform names when it must skip one (see `platformContract`). */
export type ContractCase =
  | 'ready'
  | 'env-only'
  | 'code'
  | 'build-fails'
  | 'invalid-manifest'
  | 'rollout-fails'
  | 'cron-disabled'
  | 'http-disabled'
  | 'disabled-answer'
  | 'answers-at-once'
  | 'recovery-clears-error'
  | 'deleted'
  | 'job-runs'
  | 'job-missing-function'
  | 'pinned'
  | 'secret-missing'
  | 'secret-namespaced'
  | 'secret-rotation'
  | 'secret-key-removed'
  | 'secret-unseen'
  | 'commit-url-refused'
  | 'build-history'
  | 'logs-refused'
  | 'job-fails'
  | 'rebuild'
  | 'code-refused'
  | 'code-check-unavailable'
  | 'scale-to-zero'
  | 'preview'
  | 'autoscale'
  | 'sops-secret'
  | 'async'
  | 'amqp-trigger';

/**
 * The code security gate every contract platform runs with: an endpoint speaking the chat-completions
 * wire format (no model runs here), which the contract starts before the platform and answers from
 * the code it is sent. A platform passes `url` and `apiKey` as its operator's settings would.
 */
export interface ContractCodeGate {
  readonly url: string;
  readonly apiKey: string;
}

/**
 * The operator's age key every contract platform decrypts SOPS files in git with, and the sops
 * binary it runs (test/pretest.sh builds both): a platform takes them as its operator's settings would.
 */
export interface ContractSops {
  /** The key file age-keygen wrote. */
  readonly keyFile: string;
  readonly binary: string;
}

/**
 * What the contract starts before the platform, for every case: the code gate's endpoint, the SOPS
 * key, and a real RabbitMQ (Debian's rabbitmq-server), whose queues amqp Triggers consume and where a
 * platform may keep what it journals (kube: its stream of asynchronous invocations).
 */
export interface ContractServices {
  readonly gate: ContractCodeGate;
  readonly sops: ContractSops;
  /** amqp://guest:guest@127.0.0.1:PORT/ */
  readonly amqpUrl: string;
}

/** How much of what sless logged a failed case prints. */
const LOG_TAIL_LINES = 80;

/** Code holding this word is refused by the contract's gate, with `UNSAFE_REASON`. */
const UNSAFE_MARKER = 'xmrig';
const UNSAFE_REASON = 'runs the xmrig cryptocurrency miner';
const SAFE_REASON = 'an ordinary handler';
/** Code holding this word finds the gate's endpoint failing (HTTP 500). */
const GATE_DOWN_MARKER = 'gate-endpoint-overloaded';
/** A stand-in for an operator's key to the endpoint: it must reach the endpoint and nothing else. */
const GATE_API_KEY = `sk-contract-gate-${randomBytes(8).toString('hex')}`;

/**
 * A file the contract commits beside a handler: the gate sees `marker` in the function's code, and the
 * contract tells the function's checks from others' by its name.
 */
const gateNote = (fnName: string, marker: string) => ({
  [`${fnName}/note.js`]: `// ${gateNoteTitle(fnName)}: this module would start ${marker}\nmodule.exports = {};\n`,
});
const gateNoteTitle = (fnName: string) => `code of ${fnName}`;

/**
 * The branch previews every contract platform's GitSource has (spec.previews): the branches matched,
 * and the idle time after which a preview rests at zero.
 */
export const PREVIEWS = { branches: ['preview/*'], idleSeconds: 2 };

/** What the handler the contract commits throws at start when it is meant to crash. */
export const CRASH_MESSAGE = 'no config at start';

/** What the handler throws in a job run whose event has `fail: true`. */
export const RUN_FAILURE_MESSAGE = 'the run was asked to fail';

/** The handler of `name`, at the path the contract commits it. */
export const handlerPath = (name: string) => `${name}/handler.js`;

/** What a handler written with `instance` holds: an id it draws once, when its instance starts. */
const INSTANCE_ID = "const INSTANCE = require('node:crypto').randomUUID();";
/** And what it does then: a line in RUN_LOG, when its environment names one, for `starts` to count. */
const START_LINE =
  "if (process.env.RUN_LOG) require('node:fs').appendFileSync(process.env.RUN_LOG, JSON.stringify({ started: process.env.SLESS_FUNCTION_NAME, instance: INSTANCE }) + '\\n');";

/** Beside RUN_LOG, the file whose presence releases what handlers written with `hold` hold. */
const RELEASE_SUFFIX = '.open';
export const releaseGateOf = (runLog: string) => `${runLog}${RELEASE_SUFFIX}`;

/**
 * What a handler written with `hold` does with a request (not a job run's event) until the file beside
 * RUN_LOG, `RUN_LOG.open`, exists: logs it to RUN_LOG and waits for that file.
 */
const HOLD_LINES = [
  `  if (process.env.RUN_LOG && !process.env.SLESS_EVENT && !require('node:fs').existsSync(process.env.RUN_LOG + '${RELEASE_SUFFIX}')) {`,
  "    const fs = require('node:fs');",
  "    fs.appendFileSync(process.env.RUN_LOG, JSON.stringify({ held: process.env.SLESS_FUNCTION_NAME }) + '\\n');",
  `    while (!fs.existsSync(process.env.RUN_LOG + '${RELEASE_SUFFIX}')) await new Promise((r) => setTimeout(r, 20));`,
  '  }',
];

/**
 * The status a handler written with `answers` gives a request asking for `asked` (the `answer` its
 * body names, or else its path), on its `attempt` (the x-sless-attempt header of an asynchronous
 * invocation or a queue delivery): `/teapot` is a 418, `/always` a 500, `/twice` a 503 twice and then
 * a 200, anything else a 200. Plain JavaScript, so the handler holds it as it is.
 */
export function answerStatus(asked: string, attempt: number): number {
  if (asked.endsWith('/teapot')) return 418;
  if (asked.endsWith('/always')) return 500;
  if (asked.endsWith('/twice')) return attempt <= 2 ? 503 : 200;
  return 200;
}

/** What a handler written with `answers` answers: its body's `answer`, or else its path. */
export const askedOf = (body: unknown, path: string): string => {
  const answer = body && typeof body === 'object' ? (body as { answer?: unknown }).answer : undefined;
  return typeof answer === 'string' ? answer : path;
};

/** The line of a handler written with `answers` that decides its status, which tells such a handler. */
const ANSWER_STATUS_LINE =
  "  const status = answerStatus(askedOf(event.body, event.path), Number(event.headers['x-sless-attempt'] ?? 0));";

/**
 * What a handler written with `answers` does first: a request whose body has a `tag` is logged to
 * RUN_LOG with its attempt (for `deliveries`), and anything but a 200 is answered at once.
 */
const ANSWER_LINES = [
  `  const answerStatus = ${answerStatus.toString()};`,
  `  const askedOf = ${askedOf.toString()};`,
  "  if (process.env.RUN_LOG && event.body && event.body.tag) require('node:fs').appendFileSync(process.env.RUN_LOG, JSON.stringify({ delivered: process.env.SLESS_FUNCTION_NAME, tag: event.body.tag, attempt: Number(event.headers['x-sless-attempt'] ?? 0) }) + '\\n');",
  ANSWER_STATUS_LINE,
  '  if (status !== 200) return { statusCode: status, body: { status } };',
];

/** Whether a handler the contract wrote answers statuses by what a request asks (see `answerStatus`). */
export function handlerAnswers(source: string): boolean {
  return source.includes(ANSWER_STATUS_LINE);
}

/** Whether a handler the contract wrote holds its requests until released (see `handler`). */
export function handlerHolds(source: string): boolean {
  return source.includes(HOLD_LINES[0] as string);
}

/** Whether a handler the contract wrote answers with its instance's id (see `handler`). */
export function handlerReportsInstance(source: string): boolean {
  return source.includes(INSTANCE_ID);
}

/**
 * A Node handler answering `{ version, word }`: the code's version and the WORD of its environment,
 * which together tell which revision serves; with `instance`, also the id its instance drew at start,
 * which tells one start from another, and which it logs to RUN_LOG; with `hold`, it holds each
 * request until the contract releases it (`release`); with `answers`, it answers the status
 * `answerStatus` gives the request. A job run (SLESS_EVENT set) appends a line to RUN_LOG when the
 * environment names one, and then throws when its event has `fail: true`.
 */
export function handler(
  version: string,
  options: { crashOnStart?: boolean; instance?: boolean; hold?: boolean; answers?: boolean } = {},
): string {
  return [
    options.crashOnStart ? `throw new Error('${CRASH_MESSAGE}');` : '',
    ...(options.instance ? [INSTANCE_ID, START_LINE] : []),
    'exports.handle = async (event) => {',
    ...(options.hold ? HOLD_LINES : []),
    ...(options.answers ? ANSWER_LINES : []),
    "  if (process.env.SLESS_EVENT && process.env.RUN_LOG) require('node:fs').appendFileSync(process.env.RUN_LOG, JSON.stringify(event.body) + '\\n');",
    `  if (process.env.SLESS_EVENT && event.body && event.body.fail) throw new Error('${RUN_FAILURE_MESSAGE}');`,
    `  return { version: '${version}', word: process.env.WORD ?? null${options.instance ? ', instance: INSTANCE' : ''} };`,
    '};',
    '',
  ].join('\n');
}

/** The version a handler the contract wrote answers with (a stand-in for a pod reads it from the code). */
export function versionOfHandler(source: string): string | undefined {
  return /return \{ version: '([^']+)'/.exec(source)?.[1];
}

export function functionManifest(name: string, spec: Record<string, unknown> = {}): string {
  const body = { runtime: 'nodejs20', entrypoint: 'handler.handle', ...spec };
  return `apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata:\n  name: ${name}\nspec: ${JSON.stringify(body)}\n`;
}

function triggerManifest(name: string, spec: Record<string, unknown>): string {
  return `---\napiVersion: sless.dev/v1alpha1\nkind: Trigger\nmetadata:\n  name: ${name}\nspec: ${JSON.stringify(spec)}\n`;
}

function jobManifest(name: string, fn: string, runId: number, event: Record<string, unknown> = {}): string {
  return `apiVersion: sless.dev/v1alpha1\nkind: FunctionJob\nmetadata:\n  name: ${name}\nspec: ${JSON.stringify({ function: fn, runId, event: { job: name, n: runId, ...event } })}\n`;
}

/** A package.json cut off mid-way: the install step fails on it at once, on every platform. */
const brokenPackageJson = (name: string) => `{ "name": "${name}", "dependencies": { "left-pad": `;

/** A value no golden, log line or object holds by chance: a stand-in for a real credential. */
const secretValue = (what: string) => `sk_${what}_${randomBytes(12).toString('hex')}`;

/** The env of a function whose WORD comes from key `key` of Secret `name`. */
const wordFrom = (name: string, key = 'word') => ({ WORD: { secretRef: { name, key } } });

/** Polls until `check` returns a value (not undefined or false); the last error says what was seen. */
export function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 45_000,
): Promise<T> {
  return pollUntil(what, check, timeoutMs, 50);
}

const condition = (fn: { status?: { conditions?: Condition[] } }, type: string) =>
  fn.status?.conditions?.find((c) => c.type === type);

/** Registers the contract's cases against the platform `setUp` starts (once, for all cases). */
export function platformContract(
  name: string,
  setUp: (services: ContractServices) => Promise<PlatformUnderTest>,
  /** Cases this platform does not pass, each with the difference from the contract it shows. */
  differences: Partial<Record<ContractCase, string>> = {},
): void {
  describe(`platform contract: ${name}`, () => {
    let p: PlatformUnderTest;
    let gate: ChatCompletionsServer;
    /** Where the operator's age key and the files the contract encrypts are. */
    let keys: string;
    let recipient: string;
    let broker: RabbitMq;
    /** Requests the gate had for the code of `fnName` (code committed with its `gateNote`). */
    const checksOf = (fnName: string) =>
      gate.requests.filter((r) => sentCode(r).includes(`// ${gateNoteTitle(fnName)}:`));
    const contractCase = (id: ContractCase, title: string, body: () => Promise<void>) => {
      // SLESS_CONTRACT_ALL=1 runs the skipped cases too: to see whether a difference is still there.
      const difference = process.env.SLESS_CONTRACT_ALL === '1' ? undefined : differences[id];
      if (difference) it.skip(`${title} [skipped on ${name}: ${difference}]`, body);
      else it(title, body);
    };

    // One platform for every case (a kube one is a cluster-backed system).
    beforeAll(async () => {
      gate = await startChatCompletionsServer();
      gate.answer = (request) => {
        const code = sentCode(request);
        if (code.includes(GATE_DOWN_MARKER)) return { status: 500, body: '{"error":"upstream overloaded"}' };
        if (code.includes(UNSAFE_MARKER)) return { verdict: { safe: false, reason: UNSAFE_REASON } };
        return { verdict: { safe: true, reason: SAFE_REASON } };
      };
      keys = await tempDir('contract-age');
      const operatorKey = await ageKey(keys, 'operator.key');
      recipient = operatorKey.recipient;
      broker = await startRabbitMq();
      p = await setUp({
        gate: { url: gate.url, apiKey: GATE_API_KEY },
        sops: { keyFile: operatorKey.file, binary: SOPS },
        amqpUrl: broker.url,
      });
    });
    // A failed case shows what sless logged last: a run under load leaves nothing else to read.
    afterEach(({ task }) => {
      if (task.result?.state !== 'fail' || !p) return;
      const tail = p.logged().trimEnd().split('\n').slice(-LOG_TAIL_LINES).join('\n');
      process.stderr.write(`--- ${name}: the last ${LOG_TAIL_LINES} lines sless logged ---\n${tail}\n`);
    });
    afterAll(async () => {
      await p?.stop();
      await broker?.stop();
      await gate?.close();
      if (keys) await rm(keys, { recursive: true, force: true });
    });

    /** Commits the files and has the platform read them. */
    const push = async (files: Record<string, string | null>) => {
      const commit = await p.commit(files);
      await p.sync();
      return commit;
    };

    /** Ready at this commit, for the generation it has now: the revision the commit asks for serves. */
    const readyAt = (fnName: string, commit: string) =>
      waitFor(`${fnName} Ready at ${commit.slice(0, 12)}`, async () => {
        const fn = await p.fn(fnName);
        const ready = fn && condition(fn, 'Ready');
        return fn?.status?.phase === 'Ready' &&
          fn.status.commit === commit &&
          ready?.status === 'True' &&
          ready.observedGeneration === fn.metadata.generation
          ? fn
          : undefined;
      });

    /**
     * Ready (condition) at this commit, whether it runs now or rests at zero (phase Ready or
     * ScaledToZero): for a function that scales to zero, when a platform starts it is its own.
     */
    const servingAt = (fnName: string, commit: string) =>
      waitFor(`${fnName} serving at ${commit.slice(0, 12)}`, async () => {
        const fn = await p.fn(fnName);
        const ready = fn && condition(fn, 'Ready');
        return (fn?.status?.phase === 'Ready' || fn?.status?.phase === 'ScaledToZero') &&
          fn.status.commit === commit &&
          ready?.status === 'True' &&
          ready.observedGeneration === fn.metadata.generation
          ? fn
          : undefined;
      });

    /** Pushes a new function at version v1 (WORD=one), plays its build and waits until it serves. */
    const deploy = async (fnName: string, extra: Record<string, string> = {}) => {
      const commit = await push({
        [`${fnName}/function.yaml`]: functionManifest(fnName, { env: { WORD: 'one' } }),
        [handlerPath(fnName)]: handler('v1'),
        ...extra,
      });
      await p.finishBuild(fnName, commit);
      return { commit, fn: await readyAt(fnName, commit) };
    };

    /**
     * The Function once `commit`'s code was not built for `reason` (Ready False): it is status's
     * commit, with a build key of its own, while what `before` served at `good` serves on.
     */
    const notBuiltAt = async (
      fnName: string,
      commit: string,
      reason: string,
      before: SlessFunction,
      good: string,
    ) => {
      const fn = await waitFor(`${fnName} ${reason}`, async () => {
        const found = await p.fn(fnName);
        return found?.status?.commit === commit && condition(found, 'Ready')?.reason === reason
          ? found
          : undefined;
      });
      expect(fn.status?.buildKey).not.toBe(before.status?.buildKey);
      expect(fn.status).toMatchObject({
        phase: 'Failed',
        observedGeneration: fn.metadata.generation,
        commit,
        servingRevision: before.status?.servingRevision,
        servingCommit: good,
      });
      return fn;
    };

    /** FunctionJob `name` once run `runId` ended in `phase`. */
    const runEnded = (name: string, runId: number, phase: 'Succeeded' | 'Failed') =>
      waitFor(`${name} run ${runId} ${phase}`, async () => {
        const job = await p.job(name);
        return job?.status?.observedRunId === runId && job.status.phase === phase ? job : undefined;
      });

    /** The status of a Function that serves what `commit` asks for, with code built at `builtAt`. */
    const expectServing = (fn: SlessFunction, commit: string, builtAt: string) => {
      const status = fn.status ?? {};
      const generation = fn.metadata.generation;
      const buildKey = status.buildKey ?? '';
      expect(buildKey).toMatch(/^[0-9a-f]{32}$/);
      const revision = status.servingRevision ?? '';
      expect(revision).toMatch(new RegExp(`^${buildKey.slice(0, 12)}-[0-9a-f]{8}$`));
      expect(status).toMatchObject({
        phase: 'Ready',
        observedGeneration: generation,
        commit,
        shortCommit: commit.slice(0, 12),
        servingCommit: builtAt,
        lastBuild: { result: 'Succeeded', buildKey, commit: builtAt },
      });
      expect(status.url).toMatch(new RegExp(`/fn/${p.namespace}/${fn.metadata.name}$`));
      expect(status.image).toEqual(expect.any(String));
      expect(condition(fn, 'Ready')).toMatchObject({
        status: 'True',
        reason: 'Serving',
        message: `serving ${revision} (built at ${builtAt.slice(0, 12)})`,
        observedGeneration: generation,
      });
      expect(condition(fn, 'Reconciling')).toMatchObject({ status: 'False', observedGeneration: generation });
      expect(condition(fn, 'Stalled')).toBeUndefined();
      // One instance, answering: what `kubectl get functions` shows and the instances gauge counts.
      expect(status.instances).toEqual({ desired: 1, ready: 1 });
    };

    contractCase(
      'ready',
      'a pushed function becomes Ready at its commit, serves, and was built once',
      async () => {
        const { commit, fn } = await deploy('ready');
        expectServing(fn, commit, commit);
        expect(fn.status?.lastError).toBeUndefined();
        // The object says where it came from: the source, the commit, the manifest and the code's build key.
        expect(fn.metadata.labels).toEqual({ 'sless.dev/source': p.sourceName });
        expect(fn.metadata.annotations).toMatchObject({
          'sless.dev/commit': commit,
          'sless.dev/manifest': 'ready/function.yaml#0',
          'sless.dev/build-key': fn.status?.buildKey,
        });
        expect(await p.call('ready')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        await p.settle();
        expect(await p.builds('ready')).toBe(1);
        // Settled means settled: the status is the one that said Ready.
        const settled = await p.fn('ready');
        expect(settled?.status).toEqual(fn.status);
        // A forced sync re-plans and re-applies the same commit; once the controller drained its queues,
        // nothing was written (on kube a write would move resourceVersion) and nothing was built.
        await p.sync({ force: true });
        await p.settle();
        expect(await p.fn('ready')).toEqual(settled);
        expect(await p.builds('ready')).toBe(1);
      },
    );

    contractCase('env-only', 'an env-only commit rolls a new revision out without a build', async () => {
      const { commit: built, fn: before } = await deploy('env-only');
      const commit = await push({
        'env-only/function.yaml': functionManifest('env-only', { env: { WORD: 'two' } }),
      });
      const after = await readyAt('env-only', commit);
      expectServing(after, commit, built);
      expect(after.metadata.generation).toBeGreaterThan(before.metadata.generation ?? 0);
      expect(after.status?.buildKey).toBe(before.status?.buildKey);
      expect(after.status?.image).toBe(before.status?.image);
      expect(after.status?.servingRevision).not.toBe(before.status?.servingRevision);
      expect(await p.call('env-only')).toEqual({ status: 200, body: { version: 'v1', word: 'two' } });
      await p.settle();
      expect(await p.builds('env-only')).toBe(1);
    });

    contractCase(
      'code',
      'a code commit builds that function once and rolls it out; the others keep their build',
      async () => {
        const first = await push({
          'code/function.yaml': functionManifest('code', { env: { WORD: 'one' } }),
          [handlerPath('code')]: handler('v1'),
          'code-peer/function.yaml': functionManifest('code-peer', { env: { WORD: 'one' } }),
          [handlerPath('code-peer')]: handler('v1'),
        });
        await p.finishBuild('code', first);
        await p.finishBuild('code-peer', first);
        const before = await readyAt('code', first);
        const peer = await readyAt('code-peer', first);
        const commit = await push({ [handlerPath('code')]: handler('v2') });
        await p.finishBuild('code', commit);
        const after = await readyAt('code', commit);
        expectServing(after, commit, commit);
        expect(after.status?.buildKey).not.toBe(before.status?.buildKey);
        expect(await p.call('code')).toEqual({ status: 200, body: { version: 'v2', word: 'one' } });
        await p.settle();
        expect(await p.builds('code')).toBe(2);
        expect(await p.builds('code-peer')).toBe(1);
        // The peer did not change: not applied again, so it names the commit it last changed at and the
        // build made there, and serves what it served.
        const peerAfter = await p.fn('code-peer');
        expect(peerAfter?.metadata.annotations?.['sless.dev/commit']).toBe(first);
        expect(peerAfter?.status).toEqual(peer.status);
        expect(await p.call('code-peer')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
      },
    );

    contractCase(
      'build-fails',
      'a failing build keeps the previous revision serving: BuildFailed, Stalled, built once',
      async () => {
        const { commit: good, fn: before } = await deploy('build-fails');
        const served = before.status?.servingRevision;
        const commit = await push({
          'build-fails/package.json': brokenPackageJson('build-fails'),
          [handlerPath('build-fails')]: handler('v2'),
        });
        const words = await p.failBuild('build-fails', commit);
        const failed = await notBuiltAt('build-fails', commit, 'BuildFailed', before, good);
        const status = failed.status ?? {};
        const generation = failed.metadata.generation;
        const key = (status.buildKey ?? '').slice(0, 12);
        expect(status.lastBuild).toMatchObject({ result: 'Failed', buildKey: status.buildKey, commit });
        expect(status.lastBuild?.message).toContain(words);
        const ready = condition(failed, 'Ready');
        expect(ready).toMatchObject({ status: 'False', observedGeneration: generation });
        expect(ready?.message).toMatch(new RegExp(`^build ${key} failed: .+; still serving ${served}$`));
        expect(condition(failed, 'Stalled')).toMatchObject({
          status: 'True',
          reason: 'BuildFailed',
          message: ready?.message.replace(`; still serving ${served}`, ''),
          observedGeneration: generation,
        });
        expect(condition(failed, 'Reconciling')).toMatchObject({ status: 'False' });
        expect(await p.call('build-fails')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        // No retry loop: once settled, the failed build is the only one since the good one.
        await p.settle();
        expect(await p.builds('build-fails')).toBe(2);
        expect((await p.fn('build-fails'))?.status?.lastBuild).toEqual(status.lastBuild);

        // A later commit that builds serves: the failed one does not hold the function back.
        const fix = await push({
          'build-fails/package.json': null,
          [handlerPath('build-fails')]: handler('v3'),
        });
        await p.finishBuild('build-fails', fix);
        const fixed = await readyAt('build-fails', fix);
        expectServing(fixed, fix, fix);
        expect(await p.call('build-fails')).toEqual({ status: 200, body: { version: 'v3', word: 'one' } });
        await p.settle();
        expect(await p.builds('build-fails')).toBe(3);
      },
    );

    contractCase(
      'invalid-manifest',
      'a commit with an invalid manifest is refused naming file and field; what served serves on; a fix recovers',
      async () => {
        await deploy('invalid');
        await p.settle();
        const before = await p.fn('invalid');
        const synced = (await p.source())?.status?.lastSyncedCommit;
        await push({ 'invalid/function.yaml': functionManifest('invalid', { memoryMb: 999999 }) });
        const refused = await waitFor('source refused', async () => {
          const source = await p.source();
          return condition(source ?? {}, 'Ready')?.status === 'False' ? source : undefined;
        });
        expect(condition(refused, 'Ready')).toMatchObject({ reason: 'ValidationFailed' });
        expect(condition(refused, 'Ready')?.message).toContain(
          'invalid/function.yaml#0 spec.memoryMb: must be <= 4096',
        );
        expect(refused.status?.lastSyncedCommit).toBe(synced);
        // Nothing of the commit was applied: the Function object is the one before, and it serves.
        expect(await p.fn('invalid')).toEqual(before);
        expect(await p.call('invalid')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });

        const fix = await push({
          'invalid/function.yaml': functionManifest('invalid', { env: { WORD: 'one' }, memoryMb: 256 }),
        });
        const recovered = await waitFor('source Ready again', async () => {
          const source = await p.source();
          return condition(source ?? {}, 'Ready')?.status === 'True' ? source : undefined;
        });
        expect(recovered.status?.lastSyncedCommit).toBe(fix);
        expect((await readyAt('invalid', fix)).spec.memoryMb).toBe(256);
      },
    );

    contractCase(
      'rollout-fails',
      'a revision that never becomes available is RolloutFailed while the old one serves; a fix serves',
      async () => {
        const { commit: good, fn: before } = await deploy('rollout-fails');
        const served = before.status?.servingRevision;
        const words = await p.rollouts('rollout-fails', 'crashLoop');
        const commit = await push({ [handlerPath('rollout-fails')]: handler('v2', { crashOnStart: true }) });
        await p.finishBuild('rollout-fails', commit);
        const failed = await waitFor(
          'rollout-fails RolloutFailed',
          async () => {
            const fn = await p.fn('rollout-fails');
            return fn?.status?.commit === commit && condition(fn, 'Ready')?.reason === 'RolloutFailed'
              ? fn
              : undefined;
          },
          90_000,
        );
        const status = failed.status ?? {};
        const generation = failed.metadata.generation;
        expect(status).toMatchObject({
          phase: 'Failed',
          observedGeneration: generation,
          commit,
          servingRevision: served,
          servingCommit: good,
          // The build worked: it is the revision that does not come up.
          lastBuild: { result: 'Succeeded', commit },
        });
        const ready = condition(failed, 'Ready');
        expect(ready).toMatchObject({ status: 'False', observedGeneration: generation });
        expect(ready?.message).toContain(words);
        expect(ready?.message).toMatch(new RegExp(`; still serving ${served}$`));
        // Not stalled: a revision that did not start is retried, as a crash-looping container is.
        expect(condition(failed, 'Stalled')).toBeUndefined();
        expect(await p.call('rollout-fails')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });

        await p.rollouts('rollout-fails', 'available');
        const fix = await push({ [handlerPath('rollout-fails')]: handler('v3') });
        await p.finishBuild('rollout-fails', fix);
        const fixed = await readyAt('rollout-fails', fix);
        expectServing(fixed, fix, fix);
        expect(fixed.status?.servingRevision).not.toBe(served);
        expect(await p.call('rollout-fails')).toEqual({ status: 200, body: { version: 'v3', word: 'one' } });
      },
    );

    /** A function switched off by a Trigger of this type, and switched on again. */
    const disabledByTrigger = async (fnName: string, type: 'cron' | 'http') => {
      const trigger = (enabled: boolean) =>
        triggerManifest(`${fnName}-trigger`, {
          type,
          function: fnName,
          enabled,
          ...(type === 'cron' ? { schedule: '0 0 1 1 *' } : {}),
        });
      const manifest = functionManifest(fnName, { env: { WORD: 'one' } });
      const { commit, fn: before } = await deploy(fnName, {
        [`${fnName}/function.yaml`]: manifest + trigger(true),
      });
      const served = before.status?.servingRevision;
      await push({ [`${fnName}/function.yaml`]: manifest + trigger(false) });
      const disabled = await waitFor(`${fnName} Disabled`, async () => {
        const fn = await p.fn(fnName);
        return fn?.status?.phase === 'Disabled' ? fn : undefined;
      });
      const generation = disabled.metadata.generation;
      // Only the Trigger changed: the Function is the one the first commit applied.
      expect(generation).toBe(before.metadata.generation);
      expect(disabled.status).toMatchObject({
        observedGeneration: generation,
        commit,
        servingRevision: `${served}-off`,
        servingCommit: commit,
      });
      expect(condition(disabled, 'Ready')).toMatchObject({
        status: 'False',
        reason: 'Disabled',
        message: 'a trigger disabled this function (enabled: false)',
        observedGeneration: generation,
      });
      expect(condition(disabled, 'Reconciling')).toMatchObject({ status: 'False' });
      expect(condition(disabled, 'Stalled')).toBeUndefined();
      // The route may take a moment to follow status (see 'answers-at-once' for "at once").
      await waitFor(`${fnName} answers 503`, async () => (await p.call(fnName)).status === 503);
      expect((await p.trigger(`${fnName}-trigger`))?.status?.phase).toBe('Disabled');

      await push({ [`${fnName}/function.yaml`]: manifest + trigger(true) });
      const enabled = await waitFor(`${fnName} Ready again`, async () => {
        const fn = await p.fn(fnName);
        return fn?.status?.phase === 'Ready' && fn.status.servingRevision === served ? fn : undefined;
      });
      expectServing(enabled, commit, commit);
      const answer = await waitFor(`${fnName} serves again`, async () => {
        const served = await p.call(fnName);
        return served.status === 200 ? served : undefined;
      });
      expect(answer.body).toEqual({ version: 'v1', word: 'one' });
      await p.settle();
      expect(await p.builds(fnName)).toBe(1);
    };

    contractCase(
      'cron-disabled',
      'a cron Trigger with enabled: false makes its function Disabled (503), and enabling it serves again',
      () => disabledByTrigger('cron-off', 'cron'),
    );

    contractCase(
      'http-disabled',
      'an http Trigger with enabled: false makes its function Disabled (503), and enabling it serves again',
      () => disabledByTrigger('http-off', 'http'),
    );

    contractCase('disabled-answer', "a disabled function's 503 says it is disabled", async () => {
      const trigger = triggerManifest('quiet-trigger', {
        type: 'cron',
        function: 'quiet',
        schedule: '0 0 1 1 *',
        enabled: false,
      });
      const commit = await push({
        'quiet/function.yaml': functionManifest('quiet', { env: { WORD: 'one' } }) + trigger,
        [handlerPath('quiet')]: handler('v1'),
      });
      await p.finishBuild('quiet', commit);
      await waitFor('quiet Disabled', async () => (await p.fn('quiet'))?.status?.phase === 'Disabled');
      // A watch cache that routes /fn/ may lag the status read here by a moment, answering the 503
      // of the state before (no ready revision yet); it must come to say the function is disabled.
      const disabledAnswer = { error: `function ${p.namespace}/quiet is disabled` };
      const answer = await waitFor('quiet answers that it is disabled', async () => {
        const served = await p.call('quiet');
        return JSON.stringify(served.body) === JSON.stringify(disabledAnswer) ? served : undefined;
      });
      expect(answer).toEqual({ status: 503, body: disabledAnswer });
    });

    contractCase(
      'answers-at-once',
      '/fn/ answers for the state status reports as soon as status reports it (Disabled: 503, Ready: 200)',
      async () => {
        const trigger = (enabled: boolean) =>
          triggerManifest('prompt-trigger', {
            type: 'cron',
            function: 'prompt',
            schedule: '0 0 1 1 *',
            enabled,
          });
        const manifest = functionManifest('prompt', { env: { WORD: 'one' } });
        const { fn: before } = await deploy('prompt', { 'prompt/function.yaml': manifest + trigger(true) });
        expect(await p.call('prompt')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        await push({ 'prompt/function.yaml': manifest + trigger(false) });
        await waitFor('prompt Disabled', async () => (await p.fn('prompt'))?.status?.phase === 'Disabled');
        expect((await p.call('prompt')).status).toBe(503);
        await push({ 'prompt/function.yaml': manifest + trigger(true) });
        await waitFor('prompt Ready again', async () => {
          const fn = await p.fn('prompt');
          return (
            fn?.status?.phase === 'Ready' && fn.status.servingRevision === before.status?.servingRevision
          );
        });
        expect(await p.call('prompt')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
      },
    );

    contractCase(
      'recovery-clears-error',
      "a fix that serves after a failed rollout leaves no error in status (lastError is the failed revision's)",
      async () => {
        await deploy('recovers');
        await p.rollouts('recovers', 'crashLoop');
        const crash = await push({ [handlerPath('recovers')]: handler('v2', { crashOnStart: true }) });
        await p.finishBuild('recovers', crash);
        await waitFor(
          'recovers RolloutFailed',
          async () => {
            const fn = await p.fn('recovers');
            return fn?.status?.commit === crash && condition(fn, 'Ready')?.reason === 'RolloutFailed';
          },
          90_000,
        );
        await p.rollouts('recovers', 'available');
        const fix = await push({ [handlerPath('recovers')]: handler('v3') });
        await p.finishBuild('recovers', fix);
        const fixed = await readyAt('recovers', fix);
        expectServing(fixed, fix, fix);
        expect(fixed.status?.lastError).toBeUndefined();
      },
    );

    contractCase(
      'deleted',
      'a function deleted from the repository is removed: 404 at /fn/, nothing left running',
      async () => {
        const first = await push({
          'gone/function.yaml': functionManifest('gone', { env: { WORD: 'one' } }),
          [handlerPath('gone')]: handler('v1'),
          'stays/function.yaml': functionManifest('stays', { env: { WORD: 'one' } }),
          [handlerPath('stays')]: handler('v1'),
        });
        await p.finishBuild('gone', first);
        await p.finishBuild('stays', first);
        await readyAt('gone', first);
        await readyAt('stays', first);
        await push({ gone: null });
        await waitFor('gone removed', async () => (await p.fn('gone')) === undefined);
        await waitFor('nothing of gone left', () => p.workloadGone('gone'));
        const answer = await waitFor('gone answers 404', async () => {
          const served = await p.call('gone');
          return served.status === 404 ? served : undefined;
        });
        expect(answer.body).toEqual({ error: `unknown function ${p.namespace}/gone` });
        expect(await p.call('stays')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
      },
    );

    contractCase('job-runs', 'a FunctionJob runs once per runId; runId 0 runs nothing', async () => {
      const manifest = functionManifest('job-fn', { env: { WORD: 'one', ...p.countingEnv } });
      const first = await push({
        'job-fn/function.yaml': manifest,
        [handlerPath('job-fn')]: handler('v1'),
        'job-fn/job.yaml': jobManifest('once', 'job-fn', 0),
      });
      await p.finishBuild('job-fn', first);
      await readyAt('job-fn', first);
      const skipped = await waitFor('runId 0 Skipped', async () => {
        const job = await p.job('once');
        return job?.status?.phase === 'Skipped' ? job : undefined;
      });
      expect(skipped.status?.observedRunId).toBe(0);
      expect(await p.jobRuns('once')).toBe(0);
      expect(condition(skipped, 'Ready')).toMatchObject({ status: 'True', reason: 'Skipped' });

      const succeeded = (runId: number) => runEnded('once', runId, 'Succeeded');
      await push({ 'job-fn/job.yaml': jobManifest('once', 'job-fn', 1) });
      await p.finishJobRun('once', 1);
      const one = await succeeded(1);
      expect(one.status?.startTime).toEqual(expect.any(String));
      expect(one.status?.completionTime).toEqual(expect.any(String));
      expect(condition(one, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
      expect(await p.jobRuns('once')).toBe(1);

      // The same runId again (a forced sync, a commit that leaves it as it is) runs nothing; a new
      // runId runs once more. Run 2 having ended is the signal that everything before it was seen.
      await p.sync({ force: true });
      await push({ 'job-fn/job.yaml': `${jobManifest('once', 'job-fn', 1)}# unchanged run\n` });
      await push({ 'job-fn/job.yaml': jobManifest('once', 'job-fn', 2) });
      await p.finishJobRun('once', 2);
      await succeeded(2);
      expect(await p.jobRuns('once')).toBe(2);
    });

    contractCase(
      'job-missing-function',
      'a FunctionJob naming a function that does not exist is Failed, saying so',
      async () => {
        await p.applyJob('orphan', { function: 'ghost', runId: 1 });
        const failed = await waitFor('orphan Failed', async () => {
          const job = await p.job('orphan');
          return job?.status?.phase === 'Failed' ? job : undefined;
        });
        expect(failed.status?.message).toBe(`function "ghost" not found in namespace ${p.namespace}`);
        await p.applyJob('orphan', null);
        await waitFor('orphan removed', async () => (await p.job('orphan')) === undefined);
      },
    );

    contractCase(
      'pinned',
      'pinning a commit of the branch serves it again without a build and holds against new commits; unpinning serves the head',
      async () => {
        // Only pinned/ changes after the first commit, so the pin leaves every other case's function as it is.
        const { commit: first, fn: atFirst } = await deploy('pinned');
        const second = await push({ [handlerPath('pinned')]: handler('v2') });
        await p.finishBuild('pinned', second);
        const atSecond = await readyAt('pinned', second);
        expect(await p.call('pinned')).toEqual({ status: 200, body: { version: 'v2', word: 'one' } });
        expect(await p.builds('pinned')).toBe(2);
        const pinPath = `/v1/namespaces/${p.namespace}/sources/${p.sourceName}/pin`;

        const pinned = await p.api('POST', pinPath, { commit: first });
        expect(pinned.status).toBe(200);
        expect(pinned.body).toMatchObject({
          outcome: 'synced',
          commit: first,
          source: {
            spec: { ref: { commit: first } },
            status: { pinnedCommit: first, lastSyncedCommit: first },
          },
        });
        const back = await waitFor('pinned serves the first commit', async () => {
          const fn = await p.fn('pinned');
          return fn?.status?.phase === 'Ready' && fn.status.servingCommit === first ? fn : undefined;
        });
        // The first build's image, not a new one.
        expect(back.status?.image).toBe(atFirst.status?.image);
        expect(back.status?.buildKey).toBe(atFirst.status?.buildKey);
        // The route may take a moment to follow status (see 'answers-at-once' for "at once").
        const v1 = JSON.stringify({ status: 200, body: { version: 'v1', word: 'one' } });
        await waitFor('v1 served again', async () => JSON.stringify(await p.call('pinned')) === v1);

        // A commit that is not on the branch is refused, and the pin stays.
        const stranger = 'f'.repeat(40);
        expect(await p.api('POST', pinPath, { commit: stranger })).toEqual({
          status: 400,
          body: {
            error: `commit: ${stranger} is not a commit of branch "main" of GitSource ${p.sourceName}`,
          },
        });
        expect((await p.source())?.spec.ref).toEqual({ commit: first });
        // A new commit on the branch does not move a pinned source.
        const third = await p.commit({ [handlerPath('pinned')]: handler('v3') });
        await p.sync({ force: true });
        await p.settle();
        expect((await p.source())?.status).toMatchObject({ pinnedCommit: first, lastSyncedCommit: first });
        expect((await p.fn('pinned'))?.status?.servingCommit).toBe(first);
        expect(await p.call('pinned')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        expect(await p.builds('pinned')).toBe(2);

        const unpinned = await p.api('DELETE', pinPath);
        expect(unpinned.status).toBe(200);
        expect(unpinned.body).toMatchObject({ commit: third });
        const source = (unpinned.body as { source: GitSource }).source;
        expect(source.spec.ref).toBeUndefined();
        expect(source.status?.pinnedCommit).toBeUndefined();
        await p.finishBuild('pinned', third);
        expectServing(await readyAt('pinned', third), third, third);
        expect((await p.fn('pinned'))?.status?.buildKey).not.toBe(atSecond.status?.buildKey);
        expect(await p.call('pinned')).toEqual({ status: 200, body: { version: 'v3', word: 'one' } });
        await p.settle();
        expect(await p.builds('pinned')).toBe(3);

        // Pinned back and unpinned again: both commits were built, so neither needs a build.
        expect((await p.api('POST', pinPath, { commit: second })).status).toBe(200);
        await waitFor('pinned serves the second commit', async () => {
          const fn = await p.fn('pinned');
          return fn?.status?.phase === 'Ready' && fn.status.servingCommit === second;
        });
        expect((await p.api('DELETE', pinPath)).body).toMatchObject({ commit: third });
        expectServing(await readyAt('pinned', third), third, third);
        const v3 = JSON.stringify({ status: 200, body: { version: 'v3', word: 'one' } });
        await waitFor('v3 served again', async () => JSON.stringify(await p.call('pinned')) === v3);
        await p.settle();
        expect(await p.builds('pinned')).toBe(3);
      },
    );

    /** `fnName` waiting for a secret, its Ready message starting with `missing`. */
    const waitingForSecret = (fnName: string, missing: string) =>
      waitFor(`${fnName} SecretNotFound: ${missing}`, async () => {
        const fn = await p.fn(fnName);
        const ready = fn && condition(fn, 'Ready');
        return ready?.reason === 'SecretNotFound' && ready.message.startsWith(missing) ? fn : undefined;
      });

    /** Until `fnName` answers `word` (the route may take a moment to follow status), then that it does. */
    const servesWord = async (fnName: string, version: string, word: string) => {
      const expected = { status: 200, body: { version, word } };
      await waitFor(`${fnName} serves its secret's new value`, async () => {
        return JSON.stringify(await p.call(fnName)) === JSON.stringify(expected);
      });
      expect(await p.call(fnName)).toEqual(expected);
    };

    /** The status of a function waiting for a secret: Failed, Reconciling (not Stalled), naming it. */
    const expectWaiting = (fn: SlessFunction, commit: string, missing: string, serving?: string) => {
      const generation = fn.metadata.generation;
      expect(fn.status).toMatchObject({
        phase: 'Failed',
        observedGeneration: generation,
        commit,
        lastError: missing,
      });
      expect(fn.status?.servingRevision).toBe(serving);
      expect(condition(fn, 'Ready')).toMatchObject({
        status: 'False',
        reason: 'SecretNotFound',
        message: serving ? `${missing}; still serving ${serving}` : missing,
        observedGeneration: generation,
      });
      // Waiting, not stuck: the secret may be set at any moment, and setting it is all it takes.
      expect(condition(fn, 'Reconciling')).toMatchObject({ status: 'True', reason: 'SecretNotFound' });
      expect(condition(fn, 'Stalled')).toBeUndefined();
    };

    contractCase(
      'secret-missing',
      "a function whose Secret is missing is not Ready, naming it, and serves the Secret's value once it is set",
      async () => {
        const commit = await push({
          'vault/function.yaml': functionManifest('vault', { env: wordFrom('vault-words') }),
          [handlerPath('vault')]: handler('v1'),
        });
        await p.finishBuild('vault', commit);
        const missing = `secret "vault-words" not found in namespace ${p.namespace}`;
        expectWaiting(await waitingForSecret('vault', missing), commit, missing);
        // Nothing was rolled out without the secret: nothing serves.
        expect((await p.call('vault')).status).toBe(503);

        const value = secretValue('vault');
        await p.setSecret('vault-words', { word: value });
        const fn = await readyAt('vault', commit);
        expectServing(fn, commit, commit);
        expect(fn.status?.lastError).toBeUndefined();
        await servesWord('vault', 'v1', value);
        await p.settle();
        expect(await p.builds('vault')).toBe(1);
      },
    );

    contractCase(
      'secret-namespaced',
      "a secretRef resolves in the function's own namespace only: a Secret of that name elsewhere is not found",
      async () => {
        await p.setSecret('elsewhere', { word: secretValue('elsewhere') }, p.otherNamespace);
        const commit = await push({
          'stranger/function.yaml': functionManifest('stranger', { env: wordFrom('elsewhere') }),
          [handlerPath('stranger')]: handler('v1'),
        });
        await p.finishBuild('stranger', commit);
        const missing = `secret "elsewhere" not found in namespace ${p.namespace}`;
        expectWaiting(await waitingForSecret('stranger', missing), commit, missing);
        // Once its own namespace has one, the function serves that one's value, not the other's.
        const own = secretValue('own');
        await p.setSecret('elsewhere', { word: own });
        expectServing(await readyAt('stranger', commit), commit, commit);
        await servesWord('stranger', 'v1', own);
      },
    );

    contractCase(
      'secret-rotation',
      'a rotated Secret rolls a new revision out serving the new value, without a build or a new generation',
      async () => {
        const first = secretValue('first');
        const second = secretValue('second');
        await p.setSecret('rotated-words', { word: first });
        const commit = await push({
          'rotated/function.yaml': functionManifest('rotated', { env: wordFrom('rotated-words') }),
          [handlerPath('rotated')]: handler('v1'),
        });
        await p.finishBuild('rotated', commit);
        const before = await readyAt('rotated', commit);
        expectServing(before, commit, commit);
        await servesWord('rotated', 'v1', first);

        await p.setSecret('rotated-words', { word: second });
        const after = await waitFor('rotated Ready on a new revision', async () => {
          const fn = await p.fn('rotated');
          return fn?.status?.phase === 'Ready' &&
            fn.status.servingRevision !== before.status?.servingRevision &&
            condition(fn, 'Ready')?.status === 'True'
            ? fn
            : undefined;
        });
        expectServing(after, commit, commit);
        // The spec is as it was: the same generation and build, a new revision because the values changed.
        expect(after.metadata.generation).toBe(before.metadata.generation);
        expect(after.status?.buildKey).toBe(before.status?.buildKey);
        expect(after.status?.image).toBe(before.status?.image);
        await servesWord('rotated', 'v1', second);
        await p.settle();
        expect(await p.builds('rotated')).toBe(1);
      },
    );

    contractCase(
      'secret-key-removed',
      'a key removed from a Secret: not Ready, naming secret and key, while the old revision serves; the key back serves it again',
      async () => {
        const value = secretValue('kept');
        await p.setSecret('keyed-words', { word: value, other: 'x' });
        const commit = await push({
          'keyed/function.yaml': functionManifest('keyed', { env: wordFrom('keyed-words') }),
          [handlerPath('keyed')]: handler('v1'),
        });
        await p.finishBuild('keyed', commit);
        const before = await readyAt('keyed', commit);
        const serving = before.status?.servingRevision;
        await servesWord('keyed', 'v1', value);

        await p.setSecret('keyed-words', { other: 'x' });
        const missing = `secret "keyed-words" has no key "word" in namespace ${p.namespace}`;
        const waiting = await waitingForSecret('keyed', missing);
        expectWaiting(waiting, commit, missing, serving);
        expect(waiting.status).toMatchObject({ servingCommit: commit, image: before.status?.image });
        // Nothing was rolled out without the key: the revision that has it serves on.
        expect(await p.call('keyed')).toEqual({ status: 200, body: { version: 'v1', word: value } });

        await p.setSecret('keyed-words', { word: value, other: 'x' });
        const back = await readyAt('keyed', commit);
        expectServing(back, commit, commit);
        // The same values as before: the same revision, not a new one.
        expect(back.status?.servingRevision).toBe(serving);
        expect(back.status?.lastError).toBeUndefined();
        expect(await p.call('keyed')).toEqual({ status: 200, body: { version: 'v1', word: value } });
        await p.settle();
        expect(await p.builds('keyed')).toBe(1);
      },
    );

    contractCase(
      'secret-unseen',
      "a Secret's values appear in no status, API answer, log line of sless or anything the platform keeps",
      async () => {
        const first = secretValue('first');
        const second = secretValue('second');
        const third = secretValue('third');
        const stranger = secretValue('stranger');
        // Everything a value goes through: missing, set, rotated, a key removed, set again.
        const commit = await push({
          'hidden/function.yaml': functionManifest('hidden', {
            env: { ...wordFrom('hidden-words'), PLAIN: 'visible' },
          }),
          [handlerPath('hidden')]: handler('v1'),
        });
        await p.finishBuild('hidden', commit);
        await waitingForSecret('hidden', `secret "hidden-words" not found in namespace ${p.namespace}`);
        await p.setSecret('hidden-words', { word: first });
        await p.setSecret('hidden-words', { word: stranger }, p.otherNamespace);
        const atFirst = await readyAt('hidden', commit);
        await servesWord('hidden', 'v1', first);
        await p.setSecret('hidden-words', { word: second, other: third });
        await servesWord('hidden', 'v1', second);
        await p.setSecret('hidden-words', { other: third });
        await waitingForSecret(
          'hidden',
          `secret "hidden-words" has no key "word" in namespace ${p.namespace}`,
        );
        await p.setSecret('hidden-words', { word: second, other: third });
        await waitFor('hidden Ready again', async () => {
          const fn = await p.fn('hidden');
          return (
            fn?.status?.phase === 'Ready' && fn.status.servingRevision !== atFirst.status?.servingRevision
          );
        });
        await p.settle();

        const ns = `/v1/namespaces/${p.namespace}`;
        const answers: string[] = [];
        for (const path of [
          `${ns}/functions/hidden`,
          `${ns}/functions`,
          `${ns}/functions/hidden/builds?tail=200`,
          `${ns}/functions/hidden/logs?tail=200`,
          `${ns}/sources`,
          `${ns}/secrets`,
          `${ns}/secrets/hidden-words`,
          `/v1/namespaces/${p.otherNamespace}/secrets`,
          '/metrics',
        ])
          answers.push(`${path} ${JSON.stringify(await p.api('GET', path))}`);
        const logged = p.logged();
        const stored = await p.stored();
        // The scan reads where the function shows: the API names it, sless logged its sync and the
        // platform keeps it, plain variable and all.
        expect(answers.join('\n')).toContain('hidden-words');
        expect(logged).toContain('source synced');
        expect(stored).toContain('hidden');
        const haystacks: [string, string][] = [
          ['status', JSON.stringify(await p.fn('hidden'))],
          ['the source', JSON.stringify(await p.source())],
          ['API answers', answers.join('\n')],
          ['sless log lines', logged],
          ['what the platform keeps', stored],
        ];
        for (const value of [first, second, third, stranger])
          for (const form of [value, Buffer.from(value).toString('base64')])
            for (const [where, text] of haystacks)
              expect(text.includes(form), `${where} holds a secret value`).toBe(false);
      },
    );

    contractCase(
      'commit-url-refused',
      '/fn/{ns}/{name}@{sha} answers 404 for a commit with no kept build or a malformed suffix, and 503 when the function is disabled',
      async () => {
        const manifest = functionManifest('at-commit', { env: { WORD: 'one' } });
        const { commit } = await deploy('at-commit');
        const noBuild = (sha: string) => ({
          status: 404,
          body: {
            error: `function ${p.namespace}/at-commit has no kept build at commit ${sha}: it was never built there, or its build was removed past the build history limit`,
          },
        });
        for (const sha of ['0'.repeat(12), '0'.repeat(40)])
          expect(await p.call(`at-commit@${sha}`)).toEqual(noBuild(sha));
        for (const bad of ['at-commit@', 'at-commit@ABCDEF012345', 'at-commit@x@y', '@abc'])
          expect((await p.call(bad)).status, bad).toBe(404);
        expect(await p.call(`nope@${commit}`)).toEqual({
          status: 404,
          // Both platforms name what was asked for, suffix and all.
          body: { error: `unknown function ${p.namespace}/nope@${commit}` },
        });

        // An older commit's kept build, beside the serving one: each has its own way to /fn/.
        const head = await push({ [handlerPath('at-commit')]: handler('v2') });
        await p.finishBuild('at-commit', head);
        await readyAt('at-commit', head);
        const trigger = triggerManifest('at-commit-off', {
          type: 'http',
          function: 'at-commit',
          enabled: false,
        });
        await push({ 'at-commit/function.yaml': manifest + trigger });
        await waitFor(
          'at-commit Disabled',
          async () => (await p.fn('at-commit'))?.status?.phase === 'Disabled',
        );
        const disabled = { status: 503, body: { error: `function ${p.namespace}/at-commit is disabled` } };
        // The route may take a moment to follow status (see 'answers-at-once' for "at once").
        await waitFor('at-commit@sha disabled', async () => {
          return JSON.stringify(await p.call(`at-commit@${head.slice(0, 12)}`)) === JSON.stringify(disabled);
        });
        for (const sha of [commit.slice(0, 12), commit, head.slice(0, 12), head])
          expect(await p.call(`at-commit@${sha}`), sha).toEqual(disabled);
      },
    );

    contractCase(
      'build-history',
      'past the build history limit the oldest build goes and its commit URL answers 404; the newest stay, nothing is rebuilt',
      async () => {
        const limit = p.buildHistory;
        const { commit: oldest } = await deploy('hist');
        let head = oldest;
        // One build more than the limit: the newest of them serves, so none is kept for serving alone.
        for (let version = 2; version <= limit + 1; version++) {
          head = await push({ [handlerPath('hist')]: handler(`v${version}`) });
          await p.finishBuild('hist', head);
          await readyAt('hist', head);
        }
        const gone = (sha: string) => ({
          status: 404,
          body: {
            error: `function ${p.namespace}/hist has no kept build at commit ${sha}: it was never built there, or its build was removed past the build history limit`,
          },
        });
        // Not called before it goes: a call at a kept commit starts that build, which then serves and stays.
        await waitFor('the oldest build collected', async () => (await p.builds('hist')) === limit);
        for (const sha of [oldest.slice(0, 12), oldest])
          expect(await p.call(`hist@${sha}`)).toEqual(gone(sha));
        await p.settle();
        expect(await p.builds('hist')).toBe(limit);
        expect(await p.call('hist')).toEqual({
          status: 200,
          body: { version: `v${limit + 1}`, word: 'one' },
        });
        // A forced sync of the same head builds nothing and collects nothing more.
        await p.sync({ force: true });
        await p.settle();
        expect(await p.builds('hist')).toBe(limit);
        expect((await p.fn('hist'))?.status?.servingCommit).toBe(head);
      },
    );

    contractCase(
      'logs-refused',
      'the logs API answers 404 for an unknown function and 400, naming the field, for a bad tail or follow',
      async () => {
        await deploy('logs-bad');
        const logs = `/v1/namespaces/${p.namespace}/functions`;
        const seen: Record<string, Served> = {};
        for (const query of [
          'nope/logs',
          'logs-bad/logs?tail=-1',
          'logs-bad/logs?tail=x',
          'logs-bad/logs?tail=10001',
          'logs-bad/logs?follow=maybe',
        ])
          seen[query] = await p.api('GET', `${logs}/${query}`);
        const refused = (error: string) => ({ status: 400, body: { error } });
        expect(seen).toEqual({
          'nope/logs': { status: 404, body: { error: `Function ${p.namespace}/nope not found` } },
          'logs-bad/logs?tail=-1': refused('querystring.tail: must be >= 0'),
          'logs-bad/logs?tail=x': refused('querystring.tail: must be integer'),
          'logs-bad/logs?tail=10001': refused('querystring.tail: must be <= 10000'),
          'logs-bad/logs?follow=maybe': refused('querystring.follow: must be boolean'),
        });
      },
    );

    contractCase(
      'job-fails',
      'a FunctionJob run whose function fails is Failed, saying why; it is not run again for its runId, and the next runId runs',
      async () => {
        const manifest = functionManifest('job-bad', { env: { WORD: 'one', ...p.countingEnv } });
        const first = await push({
          'job-bad/function.yaml': manifest,
          [handlerPath('job-bad')]: handler('v1'),
          'job-bad/job.yaml': jobManifest('doomed', 'job-bad', 1, { fail: true }),
        });
        await p.finishBuild('job-bad', first);
        await readyAt('job-bad', first);
        const words = await p.failJobRun('doomed', 1);
        const failed = await runEnded('doomed', 1, 'Failed');
        expect(failed.status?.message).toContain(words);
        expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'Failed' });
        expect(await p.jobRuns('doomed')).toBe(1);
        // The function itself still serves: a failed run is the run's, not the function's.
        expect(await p.call('job-bad')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });

        // Failed is final for that runId: a forced sync runs nothing; run 2 (not asked to fail)
        // succeeding is the signal that everything before it was seen.
        await p.sync({ force: true });
        await push({ 'job-bad/job.yaml': jobManifest('doomed', 'job-bad', 2) });
        await p.finishJobRun('doomed', 2);
        const succeeded = await runEnded('doomed', 2, 'Succeeded');
        expect(condition(succeeded, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
        expect(await p.jobRuns('doomed')).toBe(2);
      },
    );

    contractCase(
      'rebuild',
      'a failed build is final for its code until a rebuild is asked for; then it builds once more, while the old revision serves',
      async () => {
        await deploy('rebuild');
        const commit = await push({
          'rebuild/package.json': brokenPackageJson('rebuild'),
          [handlerPath('rebuild')]: handler('v2'),
        });
        await p.failBuild('rebuild', commit);
        const failed = await waitFor('rebuild BuildFailed', async () => {
          const fn = await p.fn('rebuild');
          return fn?.status?.commit === commit && fn.status.lastBuild?.result === 'Failed' ? fn : undefined;
        });
        const first = failed.status?.lastBuild;
        // A forced sync of the same commit does not try the failed code again.
        await p.sync({ force: true });
        await p.settle();
        expect((await p.fn('rebuild'))?.status?.lastBuild).toEqual(first);

        const fns = `/v1/namespaces/${p.namespace}/functions`;
        expect(await p.api('POST', `${fns}/nope/rebuild`)).toEqual({
          status: 404,
          body: { error: `Function ${p.namespace}/nope not found` },
        });
        expect(await p.api('POST', `${fns}/rebuild/rebuild`)).toEqual({
          status: 202,
          body: { status: 'rebuild requested' },
        });
        // Built again: seen building (kube: its Job waits to be played), or already over with a later
        // start (local fails the broken install at once). Start times are whole seconds on kube.
        await waitFor('rebuild building again', async () => {
          const build = (await p.fn('rebuild'))?.status?.lastBuild;
          return build?.result === 'Running' || (build !== undefined && build.startedAt !== first?.startedAt);
        });
        const words = await p.failBuild('rebuild', commit);
        const again = await waitFor('rebuild failed again', async () => {
          const fn = await p.fn('rebuild');
          return fn?.status?.lastBuild?.result === 'Failed' &&
            condition(fn, 'Ready')?.reason === 'BuildFailed'
            ? fn
            : undefined;
        });
        expect(again.status?.lastBuild).toMatchObject({
          result: 'Failed',
          buildKey: first?.buildKey,
          commit,
        });
        expect(again.status?.lastBuild?.message).toContain(words);
        expect(await p.call('rebuild')).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        // Asked once, built once: settled, the second failure is the last build, and it stays so.
        await p.settle();
        expect((await p.fn('rebuild'))?.status?.lastBuild).toEqual(again.status?.lastBuild);
      },
    );

    contractCase(
      'code-refused',
      'code the gate calls unsafe is never built: CodeValidationFailed, the old revision serves, and the code is sent once',
      async () => {
        const name = 'code-refused';
        const { commit: good, fn: before } = await deploy(name, gateNote(name, 'nothing'));
        const served = before.status?.servingRevision;
        expect(before.status?.lastBuild?.codeCheck).toEqual({ result: 'Passed', message: SAFE_REASON });
        expect(checksOf(name)).toHaveLength(1);
        // The operator's key goes to the endpoint it is for.
        expect(checksOf(name)[0]?.headers.authorization).toBe(`Bearer ${GATE_API_KEY}`);

        const commit = await push({ [handlerPath(name)]: handler('v2'), ...gateNote(name, UNSAFE_MARKER) });
        const refused = await notBuiltAt(name, commit, 'CodeValidationFailed', before, good);
        const status = refused.status ?? {};
        const generation = refused.metadata.generation;
        const message = `code validation failed: ${UNSAFE_REASON}`;
        expect(status.lastError).toBe(message);
        expect(status.lastBuild).toEqual({
          result: 'Failed',
          buildKey: status.buildKey,
          commit,
          message,
          codeCheck: { result: 'Refused', message: UNSAFE_REASON },
          startedAt: expect.any(String),
          finishedAt: expect.any(String),
        });
        expect(condition(refused, 'Ready')).toMatchObject({
          status: 'False',
          reason: 'CodeValidationFailed',
          message: `${message}; still serving ${served}`,
          observedGeneration: generation,
        });
        expect(condition(refused, 'Stalled')).toMatchObject({
          status: 'True',
          reason: 'CodeValidationFailed',
          message,
          observedGeneration: generation,
        });
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        // The API says why, as status does.
        const shown = await p.api('GET', `/v1/namespaces/${p.namespace}/functions/${name}`);
        expect(shown.status).toBe(200);
        expect((shown.body as { status?: { lastError?: string } }).status?.lastError).toBe(message);
        // Nothing was built for the refused code, and it was sent once.
        await p.settle();
        expect(await p.builds(name)).toBe(1);
        expect(checksOf(name)).toHaveLength(2);
        expect((await p.fn(name))?.status?.lastBuild).toEqual(status.lastBuild);

        // A rebuild reports the refusal afresh, without sending the same code again.
        expect(await p.api('POST', `/v1/namespaces/${p.namespace}/functions/${name}/rebuild`)).toEqual({
          status: 202,
          body: { status: 'rebuild requested' },
        });
        const again = await waitFor(`${name} refused again`, async () => {
          const build = (await p.fn(name))?.status?.lastBuild;
          return build?.result === 'Failed' && build.startedAt !== status.lastBuild?.startedAt
            ? build
            : undefined;
        });
        expect(again).toMatchObject({ result: 'Failed', message, codeCheck: { result: 'Refused' } });
        await p.settle();
        expect(checksOf(name)).toHaveLength(2);
        expect(await p.builds(name)).toBe(1);
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });

        // Safe code at the next commit builds and serves: the refusal holds nothing back.
        const fix = await push({ [handlerPath(name)]: handler('v3'), ...gateNote(name, 'nothing else') });
        await p.finishBuild(name, fix);
        const fixed = await readyAt(name, fix);
        expectServing(fixed, fix, fix);
        expect(fixed.status?.lastBuild?.codeCheck).toEqual({ result: 'Passed', message: SAFE_REASON });
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v3', word: 'one' } });
        expect(checksOf(name)).toHaveLength(3);
      },
    );

    contractCase(
      'code-check-unavailable',
      'a failing gate endpoint lets the build go on, with a warning in status and the log and the key in neither',
      async () => {
        const name = 'code-check-unavailable';
        const { commit, fn } = await deploy(name, gateNote(name, GATE_DOWN_MARKER));
        expectServing(fn, commit, commit);
        const unavailable = {
          result: 'Unavailable',
          message: 'code check unavailable: endpoint answered HTTP 500',
        };
        expect(fn.status?.lastBuild?.codeCheck).toEqual(unavailable);
        // The route may take a moment to follow status (see 'answers-at-once' for "at once").
        await waitFor(`${name} served`, async () => (await p.call(name)).status === 200);
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        const warnings = p
          .logged()
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as { level: number; msg: string })
          .filter((line) => line.level === 40)
          .map((line) => line.msg);
        expect(warnings).toContain(`${unavailable.message}; building without a verdict`);
        expect(checksOf(name)).toHaveLength(1);
        expect(checksOf(name)[0]?.headers.authorization).toBe(`Bearer ${GATE_API_KEY}`);
        // Served code is not checked again by a forced sync; the key is in no log and nothing stored.
        await p.sync({ force: true });
        await p.settle();
        expect(checksOf(name)).toHaveLength(1);
        expect(await p.builds(name)).toBe(1);
        expect(p.logged()).not.toContain(GATE_API_KEY);
        expect(await p.stored()).not.toContain(GATE_API_KEY);
      },
    );

    contractCase(
      'scale-to-zero',
      'a function idle for idleSeconds rests at zero, still Ready; requests share one start; a commit at zero stays there',
      async () => {
        const name = 'scale-to-zero';
        const manifest = (scaleToZero: boolean) =>
          functionManifest(name, {
            env: { WORD: 'one', ...p.countingEnv },
            ...(scaleToZero ? { scaleToZero: { idleSeconds: 2 } } : {}),
          });
        /** The Function once it rests at zero at `commit`, serving code built at `builtAt`. */
        const atZero = async (commit: string, builtAt: string) => {
          const fn = await waitFor(`${name} at zero at ${commit.slice(0, 12)}`, async () => {
            const found = await p.fn(name);
            return found?.status?.phase === 'ScaledToZero' &&
              found.status.commit === commit &&
              condition(found, 'Ready')?.observedGeneration === found.metadata.generation
              ? found
              : undefined;
          });
          const status = fn.status ?? {};
          const generation = fn.metadata.generation;
          expect(status).toMatchObject({ observedGeneration: generation, commit, servingCommit: builtAt });
          // Still Ready: `kubectl wait --for=condition=Ready` holds, and the next request starts it.
          expect(condition(fn, 'Ready')).toMatchObject({
            status: 'True',
            reason: 'ScaledToZero',
            message: `serving ${status.servingRevision} (built at ${builtAt.slice(0, 12)}); scaled to zero, the next request starts it`,
            observedGeneration: generation,
          });
          expect(condition(fn, 'ScaledToZero')).toMatchObject({
            status: 'True',
            reason: 'ScaledToZero',
            message: 'nothing runs until the next request',
          });
          expect(condition(fn, 'Stalled')).toBeUndefined();
          expect(status.instances).toEqual({ desired: 0, ready: 0 });
          // Status follows what runs, so nothing does once it says so.
          expect(await p.running(name)).toBe(0);
          return fn;
        };
        const instanceOf = (answer: Served) => (answer.body as { instance?: string }).instance ?? '';

        const first = await push({
          [`${name}/function.yaml`]: manifest(true),
          [handlerPath(name)]: handler('v1', { instance: true }),
        });
        await p.finishBuild(name, first);
        const resting = await atZero(first, first);
        // Whether it ran once before it first rested is the platform's; what follows is counted from here.
        const started = await p.starts(name);

        // Five requests at once while nothing runs: each is held for the one start, none is refused.
        const woken = await Promise.all(Array.from({ length: 5 }, () => p.call(name)));
        const instance = instanceOf(woken[0] as Served);
        expect(instance).toMatch(/^[0-9a-f-]{36}$/);
        expect(woken).toEqual(Array(5).fill({ status: 200, body: { version: 'v1', word: 'one', instance } }));
        // Requests coming more often than idleSeconds keep that instance up, and status says it runs.
        // They come on their own, so a slow status read does not leave a gap of idleSeconds between them.
        const answers: Served[] = [];
        let calling = true;
        const caller = (async () => {
          while (calling) {
            answers.push(await p.call(name));
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
        const running = await waitFor(`${name} Ready while it runs`, async () => {
          const fn = await p.fn(name);
          return fn?.status?.phase === 'Ready' && answers.length > 0 ? fn : undefined;
        }).finally(() => {
          calling = false;
        });
        await caller;
        // Every one of them answered from the instance the five woke.
        const expected = { status: 200, body: { version: 'v1', word: 'one', instance } };
        expect(answers.filter((answer) => !isDeepStrictEqual(answer, expected))).toEqual([]);
        expect(running.status?.servingRevision).toBe(resting.status?.servingRevision);
        expect(condition(running, 'Ready')).toMatchObject({ status: 'True', reason: 'Serving' });
        expect(condition(running, 'ScaledToZero')).toMatchObject({
          status: 'False',
          reason: 'Serving',
          message: 'running',
        });
        expect(running.status?.instances).toEqual({ desired: 1, ready: 1 });
        expect(await p.running(name)).toBe(1);
        expect(await p.starts(name)).toBe(started + 1);
        // Left alone, it rests again.
        await atZero(first, first);

        // A code commit while it rests is built and rolled out at zero: nothing starts for it.
        const second = await push({ [handlerPath(name)]: handler('v2', { instance: true }) });
        await p.finishBuild(name, second);
        const moved = await atZero(second, second);
        expect(moved.status?.servingRevision).not.toBe(resting.status?.servingRevision);
        await p.settle();
        expect(await p.running(name)).toBe(0);
        expect(await p.starts(name)).toBe(started + 1);
        expect(await p.builds(name)).toBe(2);
        // The next request starts the new code, in an instance of its own.
        const next = await p.call(name);
        expect(next).toMatchObject({ status: 200, body: { version: 'v2', word: 'one' } });
        expect(instanceOf(next)).not.toBe(instance);
        expect(await p.starts(name)).toBe(started + 2);

        // A function that stops scaling to zero runs all the time again, with no ScaledToZero condition.
        const third = await push({ [`${name}/function.yaml`]: manifest(false) });
        const always = await readyAt(name, third);
        expectServing(always, third, second);
        expect(condition(always, 'ScaledToZero')).toBeUndefined();
        expect(await p.running(name)).toBe(1);
        await p.settle();
        expect(await p.builds(name)).toBe(2);
      },
    );

    contractCase(
      'preview',
      'a previewed branch serves at name@label beside main, with one build for its one change, and goes with the branch',
      async () => {
        const [name, peer] = ['preview', 'preview-peer'];
        // The label is the whole branch name, lower case, each run of other characters one `-`.
        const [branch, label] = ['preview/Try-It', 'preview-try-it'];
        const [previewName, peerPreviewName] = [`${name}--${label}`, `${peer}--${label}`];
        const manifests = {
          [`${name}/function.yaml`]: functionManifest(name, { env: { WORD: 'one' } }),
          [`${peer}/function.yaml`]: functionManifest(peer, { env: { WORD: 'one' } }),
        };
        const main = await push({
          ...manifests,
          [handlerPath(name)]: handler('v1'),
          [handlerPath(peer)]: handler('v1'),
        });
        await p.finishBuild(name, main);
        await p.finishBuild(peer, main);
        await readyAt(name, main);
        await readyAt(peer, main);
        await p.settle();
        const mainObjects = async () =>
          Promise.all([name, peer].map(async (n) => ({ ...(await p.fn(n)), status: undefined })));
        const mainBefore = await mainObjects();

        // The branch changes one function's code and leaves the other's as main has it.
        const commit = (await p.pushBranch(branch, {
          ...manifests,
          [handlerPath(name)]: handler('v2'),
          [handlerPath(peer)]: handler('v1'),
        })) as string;
        await p.sync();
        await p.finishBuild(name, commit);
        const preview = await servingAt(previewName, commit);
        expect(preview.metadata.labels).toMatchObject({
          'sless.dev/preview': label,
          'sless.dev/preview-of': name,
        });
        expect(preview.metadata.annotations).toMatchObject({ 'sless.dev/preview-branch': branch });
        expect(preview.status).toMatchObject({ commit, servingCommit: commit });
        const peerPreview = await servingAt(peerPreviewName, commit);
        // The unchanged function's preview runs main's build: same code, same build key.
        expect(peerPreview.status).toMatchObject({ servingCommit: main });
        expect(peerPreview.status?.buildKey).toBe((await p.fn(peer))?.status?.buildKey);
        await waitFor(
          `${name}@${label} served`,
          async () => (await p.call(`${name}@${label}`)).status === 200,
        );
        expect(await p.call(`${name}@${label}`)).toEqual({
          status: 200,
          body: { version: 'v2', word: 'one' },
        });
        expect(await p.call(`${peer}@${label}`)).toEqual({
          status: 200,
          body: { version: 'v1', word: 'one' },
        });
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        const source = await p.source();
        expect(source?.status?.previews).toEqual([
          {
            branch,
            label,
            commit,
            urls: [`/fn/${p.namespace}/${name}@${label}`, `/fn/${p.namespace}/${peer}@${label}`],
          },
        ]);
        expect(source?.status?.previewErrors).toEqual([]);
        // One build for the one change, kept under the previewed function's name; main's objects unwritten.
        await p.settle();
        expect([await p.builds(name), await p.builds(peer)]).toEqual([2, 1]);
        expect([await p.builds(previewName), await p.builds(peerPreviewName)]).toEqual([0, 0]);
        expect(await mainObjects()).toEqual(mainBefore);
        // A push to main leaves the previews' objects alone: main's apply does not see them, so it
        // neither prunes nor rewrites them.
        const identity = async () =>
          Promise.all(
            [previewName, peerPreviewName].map(async (n) => {
              const { uid, generation } = (await p.fn(n))?.metadata ?? {};
              return { uid, generation };
            }),
          );
        const previewsBefore = await identity();
        // A file outside every function's directory: main's commit moves, no function of it changes.
        await push({ [`notes/${name}.md`]: 'no function reads this\n' });
        await p.settle();
        expect(await identity()).toEqual(previewsBefore);
        expect(await mainObjects()).toEqual(mainBefore);

        // A label no branch has is a 404 that says so.
        const missing = await p.call(`${name}@nope`);
        expect(missing.status).toBe(404);
        expect((missing.body as { error?: string }).error).toMatch(
          new RegExp(`${p.namespace}/${name} has no branch preview "nope"`),
        );

        // Idle previews rest at zero while main runs, and the next request wakes one.
        await waitFor(`${previewName} at rest`, async () => (await p.running(previewName)) === 0);
        expect(await p.running(name)).toBe(1);
        expect(await p.call(`${name}@${label}`)).toEqual({
          status: 200,
          body: { version: 'v2', word: 'one' },
        });

        // The branch deleted: its Functions and workloads go, and main serves on as it did.
        await p.pushBranch(branch, null);
        await p.sync();
        await waitFor(
          'the previews gone',
          async () => (await p.workloadGone(previewName)) && (await p.workloadGone(peerPreviewName)),
        );
        expect((await p.source())?.status?.previews).toEqual([]);
        expect((await p.call(`${name}@${label}`)).status).toBe(404);
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        await p.settle();
        expect(await mainObjects()).toEqual(mainBefore);
        expect([await p.builds(name), await p.builds(peer)]).toEqual([2, 1]);
      },
    );

    contractCase(
      'autoscale',
      'requests in flight over the target scale a function out, no further than max, and back to min after',
      async () => {
        const name = 'autoscale';
        const instances = async () => (await p.fn(name))?.status?.instances;
        const commit = await push({
          [`${name}/function.yaml`]: functionManifest(name, {
            env: { WORD: 'one', ...p.countingEnv },
            scale: { min: 1, max: 3, target: 1, stableWindowSec: 6 },
          }),
          [handlerPath(name)]: handler('v1', { hold: true }),
        });
        await p.finishBuild(name, commit);
        expectServing(await readyAt(name, commit), commit, commit);
        expect(await p.running(name)).toBe(1);

        // Three held in flight at target 1 ask for three instances.
        const first = Array.from({ length: 3 }, () => p.call(name));
        await waitFor(`${name} at 3 instances`, async () => {
          const now = await instances();
          return now?.desired === 3 && now.ready === 3;
        });
        expect(await p.running(name)).toBe(3);
        // Five at max 3: still three, once all five are inside a handler.
        const more = Array.from({ length: 2 }, () => p.call(name));
        await waitFor('five requests held', async () => (await p.held(name)) === 5);
        // The autoscaler has seen the five for a whole stable window.
        await p.autoscalerWatched(6_000);
        expect(await instances()).toEqual({ desired: 3, ready: 3 });
        expect(await p.running(name)).toBe(3);
        await p.release(name);
        expect(await Promise.all([...first, ...more])).toEqual(
          Array(5).fill({ status: 200, body: { version: 'v1', word: 'one' } }),
        );

        // The load gone: back to min after the stable window, every request answered.
        await waitFor(
          `${name} back at 1 instance`,
          async () => {
            const now = await instances();
            return now?.desired === 1 && now.ready === 1;
          },
          60_000,
        );
        expect(await p.running(name)).toBe(1);
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
        await p.settle();
        expect(await p.builds(name)).toBe(1);
        expect(await p.held(name)).toBe(5);
      },
    );

    contractCase(
      'sops-secret',
      'a SOPS Secret in git reaches its function decrypted; a tampered, misaddressed or foreign one is refused naming the file',
      async () => {
        const name = 'sops-secret';
        const file = `${name}/db.sops.yaml`;
        const secretName = `${name}-db`;
        const value = secretValue('sops');
        const encrypted = (data: Record<string, string>, options: { namespace?: string; to?: string } = {}) =>
          sopsEncrypt(keys, secretYaml(secretName, data, options.namespace), options.to ?? recipient);
        const good = await encrypted({ word: value });
        const first = await push({
          [`${name}/function.yaml`]: functionManifest(name, { env: wordFrom(secretName) }),
          [handlerPath(name)]: handler('v1'),
          [file]: good,
        });
        await p.finishBuild(name, first);
        await readyAt(name, first);
        await waitFor(`${name} serves the decrypted value`, async () => {
          const answer = await p.call(name);
          return answer.status === 200 && (answer.body as { word?: string }).word === value;
        });
        expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: value } });
        let synced = (await p.source())?.status?.lastSyncedCommit;
        expect(synced).toBe(first);

        // Each refused commit leaves what runs as it was, and the source says which file and why.
        const tampered = good.replace(
          /(word: ENC\[AES256_GCM,data:)([^,]+)/,
          (_m, head: string, data: string) =>
            `${head}${Buffer.from(`x${data}`).toString('base64').slice(0, data.length)}`,
        );
        expect(tampered).not.toBe(good);
        const stranger = await ageKey(keys, 'stranger.key');
        const refusals: [string, string, string][] = [
          [
            'tampered',
            tampered,
            `${file}#0: cannot decrypt this SOPS file: the file was changed after it was encrypted`,
          ],
          [
            'for another key',
            await encrypted({ word: 'not for this operator' }, { to: stranger.recipient }),
            `${file}#0: cannot decrypt this SOPS file: the operator's age key is not one of the file's recipients`,
          ],
          [
            'of another namespace',
            await encrypted({ word: 'elsewhere' }, { namespace: p.otherNamespace }),
            `${file}#0 metadata.namespace: must be omitted or "${p.namespace}"`,
          ],
        ];
        for (const [what, content, message] of refusals) {
          const commit = await push({ [file]: content });
          const refused = await waitFor(`${what} refused`, async () => {
            const source = await p.source();
            return condition(source ?? {}, 'Ready')?.status === 'False' &&
              source?.status?.lastAttemptedCommit === commit
              ? source
              : undefined;
          });
          expect(condition(refused, 'Ready'), what).toMatchObject({ reason: 'ValidationFailed' });
          expect(condition(refused, 'Ready')?.message, what).toContain(message);
          expect(refused.status?.lastSyncedCommit, what).toBe(synced);
          expect(await p.call(name), what).toEqual({ status: 200, body: { version: 'v1', word: value } });
          // Back to the good file, so the next refusal is a change of its own.
          const back = await push({ [file]: good });
          await waitFor(`synced after ${what}`, async () => {
            const source = await p.source();
            return condition(source ?? {}, 'Ready')?.status === 'True' &&
              source?.status?.lastSyncedCommit === back
              ? source
              : undefined;
          });
          synced = back;
        }

        // A new value in git rolls the function out with it.
        const rotated = secretValue('sops-rotated');
        await push({ [file]: await encrypted({ word: rotated }) });
        await waitFor(`${name} serves the rotated value`, async () => {
          const answer = await p.call(name);
          return answer.status === 200 && (answer.body as { word?: string }).word === rotated;
        });
        await p.settle();
        expect(await p.builds(name)).toBe(1);
        // The decrypted values are the Secret's alone: in no log line and nothing else the platform keeps.
        for (const secret of [value, rotated])
          for (const form of [secret, Buffer.from(secret).toString('base64')]) {
            expect(p.logged()).not.toContain(form);
            expect(await p.stored()).not.toContain(form);
          }
      },
    );

    contractCase(
      'async',
      'an asynchronous invocation answers 202 and is tried to its budget: a 4xx is final, 5xx to the end a dead letter',
      async () => {
        const name = 'async';
        const commit = await push({
          [`${name}/function.yaml`]: functionManifest(name, {
            env: { WORD: 'one' },
            async: { maxAttempts: 3, backoffMs: 20 },
          }),
          [handlerPath(name)]: handler('v1', { answers: true }),
        });
        await p.finishBuild(name, commit);
        await readyAt(name, commit);
        await waitFor(`${name} served`, async () => (await p.call(name)).status === 200);
        const invocations = `/v1/namespaces/${p.namespace}/invocations`;
        const enqueue = async (path: string) => {
          const accepted = await p.api('POST', `/fn-async/${p.namespace}/${name}${path}`, { path });
          expect(accepted.status, path).toBe(202);
          const { id, location } = accepted.body as { id: string; location: string };
          expect(location).toBe(`${invocations}/${id}`);
          return id;
        };
        const ended = (id: string, state: string) =>
          waitFor(`invocation ${id} ${state}`, async () => {
            const view = await p.api('GET', `${invocations}/${id}`);
            const body = view.body as InvocationView;
            return view.status === 200 && body.state === state ? body : undefined;
          });
        const statuses = (view: InvocationView) => view.attempts.map((attempt) => attempt.status);

        const [hello, twice, always, teapot] = await Promise.all(
          ['/hello', '/twice', '/always', '/teapot'].map(enqueue),
        );
        const succeeded = await ended(hello as string, 'succeeded');
        expect(statuses(succeeded)).toEqual([200]);
        expect(succeeded.result?.status).toBe(200);
        expect(JSON.parse(succeeded.result?.body ?? '')).toEqual({ version: 'v1', word: 'one' });
        // Failing twice and then answering: three attempts, the last one the answer.
        expect(statuses(await ended(twice as string, 'succeeded'))).toEqual([503, 503, 200]);
        // Failing to the end: every attempt of the budget, then a dead letter, listed as one.
        expect(statuses(await ended(always as string, 'dead-lettered'))).toEqual([500, 500, 500]);
        // A 4xx says the request is wrong: one attempt, failed with its answer, no dead letter.
        const refused = await ended(teapot as string, 'failed');
        expect(statuses(refused)).toEqual([418]);
        expect(refused.result?.status).toBe(418);
        const letters = await p.api('GET', `/v1/namespaces/${p.namespace}/dead-letters`);
        expect(letters.status).toBe(200);
        const dead = (letters.body as { items: InvocationView[] }).items.map((view) => view.id);
        expect(dead).toContain(always);
        expect(dead).not.toContain(teapot);
        expect(dead).not.toContain(twice);
        // A failed invocation may be replayed, with a fresh budget: one more attempt, failed again.
        expect(await p.api('POST', `${invocations}/${teapot}/replay`)).toMatchObject({ status: 202 });
        const replayed = await waitFor(`invocation ${teapot} replayed`, async () => {
          const view = (await p.api('GET', `${invocations}/${teapot}`)).body as InvocationView;
          return view.state === 'failed' && view.attempts.length === 2 ? view : undefined;
        });
        expect(statuses(replayed)).toEqual([418, 418]);
      },
    );

    contractCase(
      'amqp-trigger',
      'an amqp Trigger from git delivers its queue through /fn/: a 2xx acknowledged, 5xx retried to maxAttempts and then dead-lettered, a 4xx at once; disabled, its messages wait',
      async () => {
        const name = 'amqp';
        const [orders, held, exchange, dead, letters] = [
          'amqp-orders',
          'amqp-held',
          'amqp-events',
          'amqp-dead',
          'amqp-dead-letters',
        ];
        const connection = await amqp.connect(broker.url);
        try {
          const channel = await connection.createChannel();
          await channel.assertExchange(exchange, 'topic', { durable: true });
          await channel.assertExchange(dead, 'fanout', { durable: true });
          await channel.assertQueue(letters, { durable: true });
          await channel.bindQueue(letters, dead, '');
          const publish = (tag: string, answer: string, to: { queue: string } | { key: string }) => {
            const content = Buffer.from(JSON.stringify({ tag, answer }));
            const properties = { contentType: 'application/json', persistent: true };
            if ('queue' in to) channel.sendToQueue(to.queue, content, properties);
            else channel.publish(exchange, to.key, content, properties);
          };
          const depth = async (queue: string) => (await channel.checkQueue(queue)).messageCount;
          const consumers = async (queue: string) => (await channel.checkQueue(queue)).consumerCount;
          const deadLetters = () => drainQueue(channel, letters);
          const statusOf = (trigger: string, what: string, holds: (status: TriggerStatus) => boolean) =>
            waitFor(`trigger ${trigger} ${what}`, async () => {
              const status = (await p.trigger(trigger))?.status;
              return status && holds(status) ? status : undefined;
            });
          const tagged = async (tags: string[]) =>
            (await p.deliveries(name))
              .filter((d) => tags.includes(d.tag))
              .map((d) => `${d.tag}#${d.attempt}`);

          // The broker's URL, as an operator stores it: a Secret of the Trigger's namespace.
          await p.setSecret('amqp-broker', { url: broker.url });
          const amqpTrigger = (trigger: string, spec: Record<string, unknown>) =>
            triggerManifest(trigger, {
              type: 'amqp',
              function: name,
              secretRef: { name: 'amqp-broker' },
              prefetch: 1,
              ...spec,
            });
          const heldTrigger = (enabled: boolean) =>
            amqpTrigger(held, { queue: held, maxAttempts: 1, enabled });
          const commit = await push({
            [`${name}/function.yaml`]: functionManifest(name, { env: { WORD: 'one', ...p.countingEnv } }),
            [handlerPath(name)]: handler('v1', { answers: true }),
            [`${name}/orders.yaml`]: amqpTrigger(orders, {
              queue: orders,
              exchange,
              routingKey: 'order.*',
              maxAttempts: 3,
              deadLetterExchange: dead,
            }),
            [`${name}/held.yaml`]: heldTrigger(true),
          });
          await p.finishBuild(name, commit);
          await readyAt(name, commit);
          for (const trigger of [orders, held]) {
            const consuming = await statusOf(trigger, 'consumes', (s) => s.consumer === 'consuming');
            expect(consuming.phase, trigger).toBe('Ready');
            expect(condition({ status: consuming }, 'Ready'), trigger).toMatchObject({
              status: 'True',
              reason: 'Scheduled',
              message: `queue ${trigger}: consuming`,
            });
            expect(await consumers(trigger), trigger).toBe(1);
          }
          // Where failed messages end, said before any fails.
          expect(condition((await p.trigger(orders)) ?? {}, 'DeadLetters')).toMatchObject({
            status: 'True',
            reason: 'DeadLetterExchange',
            message: `a message failing 3 attempts (or answered 4xx) is published to exchange ${dead}`,
          });
          expect(condition((await p.trigger(held)) ?? {}, 'DeadLetters')).toMatchObject({
            status: 'False',
            reason: 'NoDeadLetterExchange',
            message: `no deadLetterExchange: a message failing 1 attempt (or answered 4xx) is rejected without requeue, and RabbitMQ drops it unless queue ${held} has its own dead-letter exchange (an x-dead-letter-exchange argument or policy)`,
          });

          // Through the exchange, by routing key: one the binding does not match reaches no queue.
          publish('unbound', '/hello', { key: 'invoice.created' });
          for (const [tag, answer] of [
            ['ok', '/hello'],
            ['always', '/always'],
            ['teapot', '/teapot'],
            ['twice', '/twice'],
          ] as const)
            publish(tag, answer, { key: 'order.created' });
          const settled = await statusOf(
            orders,
            'settles four',
            (s) => s.acknowledged === 2 && s.deadLettered === 2,
          );
          // Prefetch 1: one message at a time, each tried to its end before the next.
          expect(await tagged(['unbound', 'ok', 'always', 'teapot', 'twice'])).toEqual([
            'ok#1',
            'always#1',
            'always#2',
            'always#3',
            'teapot#1',
            'twice#1',
            'twice#2',
            'twice#3',
          ]);
          expect(settled.lastMessage).toMatch(/: acknowledged after 3 attempts$/);
          expect(settled.lastError).toBe('message failed 1 attempt, with status 418');
          expect(await depth(orders)).toBe(0);
          const letter = (m: GetMessage) => ({
            tag: (JSON.parse(m.content.toString()) as { tag: string }).tag,
            attempts: m.properties.headers?.['x-sless-attempts'],
            lastError: m.properties.headers?.['x-sless-last-error'],
            queue: m.properties.headers?.['x-sless-queue'],
          });
          expect((await deadLetters()).map(letter)).toEqual([
            { tag: 'always', attempts: 3, lastError: 'status 500', queue: orders },
            { tag: 'teapot', attempts: 1, lastError: 'status 418', queue: orders },
          ]);

          // Without a deadLetterExchange a failed message is rejected, and the broker drops it.
          publish('dropped', '/teapot', { queue: held });
          const dropped = await statusOf(held, 'rejects one', (s) => s.deadLettered === 1);
          expect(dropped.lastMessage).toMatch(
            /: rejected without requeue after 1 attempt \(status 418\); no deadLetterExchange$/,
          );
          expect(dropped.acknowledged).toBe(0);
          expect(await depth(held)).toBe(0);
          expect(await deadLetters()).toEqual([]);

          // Disabled: its consumer stops and what is published waits in the queue; the function serves on.
          await push({ [`${name}/held.yaml`]: heldTrigger(false) });
          const paused = await statusOf(held, 'pauses', (s) => s.consumer === 'paused');
          expect(paused.phase).toBe('Disabled');
          expect(condition({ status: paused }, 'Ready')).toMatchObject({
            status: 'True',
            reason: 'Disabled',
            message: 'disabled',
          });
          await waitFor(`no consumer on ${held}`, async () => (await consumers(held)) === 0);
          for (const tag of ['kept-0', 'kept-1', 'kept-2']) publish(tag, '/hello', { queue: held });
          await waitFor(`three messages wait on ${held}`, async () => (await depth(held)) === 3);
          // Once a message published after them went through the other Trigger, they are still waiting.
          publish('sentinel', '/hello', { key: 'order.placed' });
          await waitFor('the sentinel delivered', async () => (await tagged(['sentinel'])).length > 0);
          expect(await depth(held)).toBe(3);
          expect(await consumers(held)).toBe(0);
          expect(await tagged(['kept-0', 'kept-1', 'kept-2'])).toEqual([]);
          expect(await p.call(name)).toEqual({ status: 200, body: { version: 'v1', word: 'one' } });
          expect((await p.fn(name))?.status?.phase).toBe('Ready');

          // Enabled again, it delivers what waited, in order, once each.
          await push({ [`${name}/held.yaml`]: heldTrigger(true) });
          const resumed = await statusOf(held, 'delivers the kept three', (s) => s.acknowledged === 3);
          expect(resumed.consumer).toBe('consuming');
          expect(await depth(held)).toBe(0);
          await p.settle();
          expect(await tagged(['kept-0', 'kept-1', 'kept-2', 'sentinel', 'unbound'])).toEqual([
            'sentinel#1',
            'kept-0#1',
            'kept-1#1',
            'kept-2#1',
          ]);
          expect(await p.builds(name)).toBe(1);
          // The broker's password is the Secret's alone.
          const password = `:${new URL(broker.url).password}@`;
          expect(p.logged()).not.toContain(password);
          expect(await p.stored()).not.toContain(password);
        } finally {
          await connection.close().catch(() => undefined);
        }
      },
    );
  });
}
