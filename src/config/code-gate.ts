/**
 * Settings of the code security gate (an OpenAI-compatible chat-completions endpoint asked about the
 * code before each build). Off unless enabled. Each setting is read as `SLESS_LLM_*` (this project's
 * prefix, which wins) or as the plain `LLM_*` name.
 */
import { parseDuration } from '../core/duration.js';

export type CodeGateSettings =
  | { readonly enabled: false }
  | {
      readonly enabled: true;
      /** The full chat-completions URL (a base URL gets `/chat/completions` added). */
      readonly endpoint: string;
      /** Sent as a Bearer token; never logged. */
      readonly apiKey: string | undefined;
      readonly model: string;
      readonly timeoutMs: number;
    };

export class CodeGateConfigError extends Error {}

const DEFAULT_TIMEOUT = '15s';
const DEFAULT_MODEL = 'gpt-4o-mini';

function setting(env: NodeJS.ProcessEnv, name: string): { name: string; value: string } | undefined {
  for (const key of [`SLESS_${name}`, name]) {
    const value = env[key];
    if (value !== undefined && value !== '') return { name: key, value };
  }
  return undefined;
}

function parseEnabled(found: { name: string; value: string } | undefined): boolean {
  if (found === undefined) return false;
  const value = found.value.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(value)) return true;
  if (['0', 'false', 'no', 'off'].includes(value)) return false;
  throw new CodeGateConfigError(`${found.name}: "${found.value}" must be true or false`);
}

/** `15s`, `500ms`, `1m`, or a bare number of seconds. */
function parseTimeout(found: { name: string; value: string } | undefined): number {
  const text = found?.value ?? DEFAULT_TIMEOUT;
  const ms = /^[0-9]+(\.[0-9]+)?$/.test(text)
    ? Math.round(Number(text) * 1000)
    : (() => {
        try {
          return parseDuration(text);
        } catch {
          return Number.NaN;
        }
      })();
  if (!Number.isFinite(ms) || ms <= 0)
    throw new CodeGateConfigError(`${found?.name}: "${text}" must be a duration such as 15s, 500ms or 15`);
  return ms;
}

function chatCompletionsUrl(found: { name: string; value: string } | undefined): string {
  if (found === undefined)
    throw new CodeGateConfigError(
      'LLM_ENDPOINT is required when LLM_ENABLED is true (e.g. https://api.openai.com/v1)',
    );
  let url: URL;
  try {
    url = new URL(found.value);
  } catch {
    throw new CodeGateConfigError(`${found.name}: "${found.value}" is not a full http(s) URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CodeGateConfigError(`${found.name}: "${found.value}" is not a full http(s) URL`);
  if (url.username || url.password)
    throw new CodeGateConfigError(`${found.name}: put the key in LLM_API_KEY, not in the URL`);
  const base = url.toString().replace(/\/+$/, '');
  return base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;
}

export function loadCodeGateSettings(env: NodeJS.ProcessEnv): CodeGateSettings {
  if (!parseEnabled(setting(env, 'LLM_ENABLED'))) return Object.freeze({ enabled: false });
  return Object.freeze({
    enabled: true,
    endpoint: chatCompletionsUrl(setting(env, 'LLM_ENDPOINT')),
    apiKey: setting(env, 'LLM_API_KEY')?.value,
    model: setting(env, 'LLM_MODEL')?.value ?? DEFAULT_MODEL,
    timeoutMs: parseTimeout(setting(env, 'LLM_TIMEOUT')),
  });
}
