/**
 * `sless logs <function>`: prints a function's logs from a running sless (local or kube) through
 * the API, each line prefixed with the instance (pod) that wrote it; stderr lines go to stderr.
 */
import { parseArgs } from 'node:util';
import type { LogLine } from '../core/logs.js';
import { UsageError } from './usage.js';

export const LOGS_USAGE =
  'sless logs <function> [-n NAMESPACE] [--tail N] [-f|--follow] [--server URL] (token: SLESS_TOKEN)';

export interface LogsOutput {
  stdout(text: string): void;
  stderr(text: string): void;
}

export async function printLogs(
  argv: string[],
  output: LogsOutput,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      namespace: { type: 'string', short: 'n' },
      tail: { type: 'string' },
      follow: { type: 'boolean', short: 'f' },
      server: { type: 'string' },
    },
  });
  const [name, ...extra] = positionals;
  if (!name || extra.length > 0) throw new UsageError('logs takes exactly one function name');
  const tail = values.tail ?? '100';
  if (!/^[0-9]+$/.test(tail)) throw new UsageError(`--tail: "${tail}" is not a number of lines`);
  const server = (values.server ?? env.SLESS_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
  const namespace = values.namespace ?? env.SLESS_NAMESPACE ?? 'default';
  const url = `${server}/v1/namespaces/${encodeURIComponent(namespace)}/functions/${encodeURIComponent(name)}/logs?tail=${tail}&follow=${values.follow === true}`;
  const response = await fetch(url, {
    headers: env.SLESS_TOKEN ? { authorization: `Bearer ${env.SLESS_TOKEN}` } : {},
  });
  if (!response.ok || !response.body) {
    const text = await response.text();
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: string }).error ?? text;
    } catch {
      // not our error shape: print it as it came
    }
    output.stderr(`sless logs: ${response.status} ${message}\n`);
    return 1;
  }
  let partial = '';
  const decoder = new TextDecoder();
  const print = (raw: string) => {
    if (!raw) return;
    const entry = JSON.parse(raw) as LogLine | { error: string };
    if ('error' in entry) {
      output.stderr(`sless logs: ${entry.error}\n`);
      return;
    }
    const text = `${entry.instance} ${entry.line}\n`;
    if (entry.stream === 'stderr') output.stderr(text);
    else output.stdout(text);
  };
  for await (const chunk of response.body) {
    const parts = (partial + decoder.decode(chunk, { stream: true })).split('\n');
    partial = parts.pop() ?? '';
    for (const raw of parts) print(raw);
  }
  print(partial);
  return 0;
}
