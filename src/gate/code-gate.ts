/**
 * The code security gate: before a build, a function's text goes to an OpenAI-compatible
 * chat-completions endpoint with a fixed prompt, and the answer `{"safe": bool, "reason": "…"}` decides.
 * `safe: false` refuses the build; an endpoint that is unreachable, slow or answers garbage lets the
 * build go on with a warning (soft fail), so an outage of the endpoint never stops deployments.
 */

import { Ajv } from 'ajv';
import type { Logger } from 'pino';
import { request } from 'undici';
import type { CodeGateSettings } from '../config/code-gate.js';
import type { CodeVerdictStore, StoredCodeVerdict } from '../core/code-verdicts.js';
import { BuildFailedError } from '../core/errors.js';
import type { Builder, BuildRequest } from '../core/interfaces.js';
import { objectKey } from '../core/object-key.js';
import {
  ANNOTATION_BUILD_KEY,
  type BuildRecord,
  type CodeCheck,
  type SlessFunction,
} from '../core/resources.js';
import { type CodeText, collectCodeText, MAX_CHECKED_BYTES } from './code-text.js';

export const CODE_CHECK_PROMPT = [
  'You review the source code of one serverless function before it is built and deployed on a shared platform.',
  'Decide whether the code is malicious. Treat it as unsafe if it does any of the following:',
  '1. cryptocurrency mining;',
  '2. DDoS or botnet behaviour (flooding targets, joining or controlling a botnet);',
  '3. port scanning or network reconnaissance;',
  '4. reverse shells or command-and-control (C2) channels;',
  '5. container escape or host access (mounting the host, abusing the container runtime socket, kernel exploits, reading other tenants\u2019 data or the node\u2019s credentials);',
  '6. obfuscation meant to hide what the code does (encoded payloads that are decoded and executed, packed or minified code that hides behaviour).',
  'Ordinary web handlers, HTTP calls to APIs, databases, file processing and dependencies are safe.',
  'Answer with one JSON object and nothing else: {"safe": true or false, "reason": "one short sentence"}.',
].join('\n');

const MAX_ANSWER_BYTES = 1024 * 1024;
const MAX_REASON = 500;
const VERDICT_CACHE_LIMIT = 10_000;

interface Verdict {
  safe: boolean;
  reason: string;
}
interface Completion {
  choices: { message: { content: string } }[];
}

const VERDICT_SCHEMA = {
  type: 'object',
  required: ['safe', 'reason'],
  properties: { safe: { type: 'boolean' }, reason: { type: 'string' } },
};

const COMPLETION_SCHEMA = {
  type: 'object',
  required: ['choices'],
  properties: {
    choices: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['message'],
        properties: {
          message: { type: 'object', required: ['content'], properties: { content: { type: 'string' } } },
        },
      },
    },
  },
};

/**
 * The answer checks, compiled when a gate is made: most starts have the gate off, and compiling them
 * at import cost every start time.
 */
class AnswerChecks {
  readonly verdict = new Ajv({ strict: true }).compile<Verdict>(VERDICT_SCHEMA);
  readonly completion = new Ajv({ strict: false }).compile<Completion>(COMPLETION_SCHEMA);
}

type EnabledSettings = Extract<CodeGateSettings, { enabled: true }>;

/** Why an answer could not be used; becomes an Unavailable check, never a refusal. */
class UnusableAnswer extends Error {}

function userMessage(code: CodeText): string {
  return code.files.map((f) => `=== ${f.path} ===\n${f.text}`).join('\n\n');
}

/** Models often wrap JSON in a Markdown fence despite being told not to; the fence is not the answer. */
function unfence(content: string): string {
  const match = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(content);
  return match ? (match[1] as string) : content.trim();
}

export class ChatCompletionsCodeChecker {
  private readonly settings: EnabledSettings;
  private readonly checks = new AnswerChecks();

  constructor(settings: EnabledSettings) {
    this.settings = settings;
  }

  /** Asks the endpoint about this code; never throws (failures are Unavailable checks). */
  async check(code: CodeText): Promise<CodeCheck> {
    try {
      const verdict = await this.ask(code);
      const reason = verdict.reason.trim().slice(0, MAX_REASON) || 'no reason given';
      return verdict.safe ? { result: 'Passed', message: reason } : { result: 'Refused', message: reason };
    } catch (error) {
      return { result: 'Unavailable', message: `code check unavailable: ${this.describe(error)}` };
    }
  }

  private describe(error: unknown): string {
    if (error instanceof UnusableAnswer) return error.message;
    const name = (error as { name?: string }).name;
    if (name === 'TimeoutError' || name === 'AbortError')
      return `no answer within ${this.settings.timeoutMs} ms`;
    const code = (error as { code?: string }).code;
    return `cannot reach ${new URL(this.settings.endpoint).host}: ${code ?? (error as Error).message}`;
  }

  private async ask(code: CodeText): Promise<{ safe: boolean; reason: string }> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
    };
    if (this.settings.apiKey) headers.authorization = `Bearer ${this.settings.apiKey}`;
    const response = await request(this.settings.endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model: this.settings.model,
        temperature: 0,
        messages: [
          { role: 'system', content: CODE_CHECK_PROMPT },
          { role: 'user', content: userMessage(code) },
        ],
      }),
      signal: AbortSignal.timeout(this.settings.timeoutMs),
      headersTimeout: this.settings.timeoutMs,
      bodyTimeout: this.settings.timeoutMs,
    });
    const text = await readBounded(response.body);
    if (response.statusCode < 200 || response.statusCode >= 300)
      throw new UnusableAnswer(`endpoint answered HTTP ${response.statusCode}`);
    let completion: unknown;
    try {
      completion = JSON.parse(text);
    } catch {
      throw new UnusableAnswer('endpoint answered something that is not JSON');
    }
    if (!this.checks.completion(completion))
      throw new UnusableAnswer('endpoint answered JSON that is not a chat completion');
    const content = completion.choices[0]?.message.content ?? '';
    let verdict: unknown;
    try {
      verdict = JSON.parse(unfence(content));
    } catch {
      throw new UnusableAnswer('the model did not answer with JSON');
    }
    if (!this.checks.verdict(verdict))
      throw new UnusableAnswer('the model answered JSON without a boolean "safe" and a string "reason"');
    return verdict;
  }
}

async function readBounded(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy();
      throw new UnusableAnswer(`endpoint answered more than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The typed error of a refused build: its reason becomes the condition reason. */
export class CodeValidationError extends BuildFailedError {
  constructor(reason: string, record: BuildRecord) {
    super({ ...record, message: `code validation failed: ${reason}` }, undefined, 'CodeValidationFailed');
  }
}

/**
 * A Builder that asks the gate before the inner builder starts, on either platform. One verdict per
 * build key: the same code is never sent twice, across restarts too when a verdict store is given
 * (Unavailable is no verdict, so it is asked again when the build is retried).
 */
export class GatedBuilder implements Builder {
  private readonly inner: Builder;
  private readonly checker: Pick<ChatCompletionsCodeChecker, 'check'>;
  private readonly logger: Logger;
  private readonly stored: CodeVerdictStore | undefined;
  private readonly verdicts = new Map<string, StoredCodeVerdict>();
  private readonly asking = new Map<string, Promise<StoredCodeVerdict>>();
  private readonly rebuilding = new Set<string>();
  readonly discardFailed: NonNullable<Builder['discardFailed']>;

  constructor(options: {
    inner: Builder;
    checker: Pick<ChatCompletionsCodeChecker, 'check'>;
    logger: Logger;
    /** Where verdicts outlive a restart; none: they are kept in memory only. */
    verdicts?: CodeVerdictStore;
  }) {
    this.inner = options.inner;
    this.checker = options.checker;
    this.logger = options.logger;
    this.stored = options.verdicts;
    // A rebuild request reports a refusal afresh (without asking again): the next lookupFailed of
    // that key leaves the stored refusal out, so the reconcile goes through build().
    this.discardFailed = async (fn) => {
      const buildKey = fn.metadata.annotations?.[ANNOTATION_BUILD_KEY];
      if (buildKey) this.rebuilding.add(buildKey);
      await this.inner.discardFailed?.(fn);
    };
  }

  async lookup(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    const record = await this.inner.lookup(fn, buildKey);
    const verdict = this.verdicts.get(buildKey);
    return record && verdict && !record.codeCheck ? { ...record, codeCheck: verdict.check } : record;
  }

  /** The inner builder's recorded failure, or the gate's stored refusal of this code. */
  async lookupFailed(fn: SlessFunction, buildKey: string): Promise<BuildRecord | undefined> {
    const failed = await this.inner.lookupFailed?.(fn, buildKey);
    if (failed) return failed;
    if (this.rebuilding.delete(buildKey)) return undefined;
    const verdict = this.verdicts.get(buildKey) ?? (await this.readStored(buildKey));
    return verdict?.check.result === 'Refused' ? refusalRecord(buildKey, verdict) : undefined;
  }

  async build(request: BuildRequest): Promise<BuildRecord> {
    const attempt = new Date().toISOString();
    const verdict = await this.verdictFor(request);
    const check = verdict.check;
    const log = this.logger.child({
      function: objectKey(request.fn.metadata.namespace, request.fn.metadata.name),
      buildKey: request.buildKey,
    });
    if (check.result === 'Refused') {
      log.warn({ reason: check.message }, 'code validation failed: the build is refused');
      // A verdict asked for this attempt is timed as the attempt; an earlier one is reported afresh.
      const timed =
        verdict.startedAt >= attempt
          ? verdict
          : { ...verdict, startedAt: attempt, finishedAt: new Date().toISOString() };
      throw new CodeValidationError(check.message, refusalRecord(request.buildKey, timed));
    }
    if (check.result === 'Unavailable' || check.result === 'Skipped')
      log.warn(`${check.message}; building without a verdict`);
    try {
      const record = await this.inner.build(request);
      return { ...record, codeCheck: check };
    } catch (error) {
      if (error instanceof BuildFailedError)
        throw new BuildFailedError({ ...error.record, codeCheck: check }, error, error.reason);
      throw error;
    }
  }

  private verdictFor(request: BuildRequest): Promise<StoredCodeVerdict> {
    const known = this.verdicts.get(request.buildKey);
    if (known && known.check.result !== 'Unavailable') return Promise.resolve(known);
    let pending = this.asking.get(request.buildKey);
    if (!pending) {
      pending = this.ask(request).finally(() => this.asking.delete(request.buildKey));
      this.asking.set(request.buildKey, pending);
    }
    return pending;
  }

  /** A verdict an earlier run stored; a store that cannot be read counts as none (the code is asked about). */
  private async readStored(buildKey: string): Promise<StoredCodeVerdict | undefined> {
    try {
      const verdict = await this.stored?.get(buildKey);
      if (verdict) this.remember(buildKey, verdict);
      return verdict;
    } catch (error) {
      this.logger.warn({ buildKey, err: (error as Error).message }, 'cannot read a stored code verdict');
      return undefined;
    }
  }

  private async ask(request: BuildRequest): Promise<StoredCodeVerdict> {
    const stored = await this.readStored(request.buildKey);
    if (stored && stored.check.result !== 'Unavailable') return stored;
    const startedAt = new Date().toISOString();
    const code = await collectCodeText(request);
    let check: CodeCheck;
    if (code.overLimit)
      check = {
        result: 'Skipped',
        message: `code check skipped: more than ${MAX_CHECKED_BYTES} bytes of text (limit ${MAX_CHECKED_BYTES / 1024} KB)`,
      };
    else if (code.files.length === 0)
      check = { result: 'Skipped', message: 'code check skipped: no text files to check' };
    else check = await this.checker.check(code);
    const verdict: StoredCodeVerdict = {
      check,
      commit: request.commit,
      startedAt,
      finishedAt: new Date().toISOString(),
    };
    // Unavailable is kept too, so status keeps showing the warning, but it is no verdict: a retried
    // build asks again, and it is not stored.
    this.remember(request.buildKey, verdict);
    if (check.result !== 'Unavailable')
      await this.stored
        ?.set(request.buildKey, verdict)
        .catch((error: unknown) =>
          this.logger.warn(
            { buildKey: request.buildKey, err: (error as Error).message },
            'cannot store the code verdict; it is kept in memory until the next restart',
          ),
        );
    return verdict;
  }

  private remember(buildKey: string, verdict: StoredCodeVerdict): void {
    if (this.verdicts.size >= VERDICT_CACHE_LIMIT && !this.verdicts.has(buildKey)) {
      const oldest = this.verdicts.keys().next().value;
      if (oldest !== undefined) this.verdicts.delete(oldest);
    }
    this.verdicts.set(buildKey, verdict);
  }
}

/** A refused build, worded and timed the same whenever it is reported. */
function refusalRecord(buildKey: string, verdict: StoredCodeVerdict): BuildRecord {
  return {
    buildKey,
    commit: verdict.commit,
    result: 'Failed',
    startedAt: verdict.startedAt,
    finishedAt: verdict.finishedAt,
    message: `code validation failed: ${verdict.check.message}`,
    codeCheck: verdict.check,
  };
}

/** The builder to use: the inner one, gated when the settings turn the gate on. */
export function withCodeGate(
  inner: Builder,
  settings: CodeGateSettings,
  logger: Logger,
  verdicts?: CodeVerdictStore,
): Builder {
  if (!settings.enabled) return inner;
  logger.info(
    { endpoint: settings.endpoint, model: settings.model, timeoutMs: settings.timeoutMs },
    'code security gate is on: code is checked before each build',
  );
  return new GatedBuilder({
    inner,
    checker: new ChatCompletionsCodeChecker(settings),
    logger,
    ...(verdicts ? { verdicts } : {}),
  });
}
