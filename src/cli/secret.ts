/**
 * `sless secret set NAME KEY=@file KEY=- …`, `sless secret delete NAME`, `sless secret list`: the
 * local secrets store through the API. Values come from a file (`KEY=@path`) or stdin (`KEY=-`, one
 * key at most, one trailing newline dropped), so they stay out of shell history; `KEY=VALUE` works
 * too, with a warning. Nothing this prints holds a value.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { UsageError } from './usage.js';

export const SECRET_USAGE =
  'sless secret set NAME KEY=@FILE|KEY=-|KEY=VALUE … | delete NAME | list [-n NAMESPACE] [--server URL] (token: SLESS_TOKEN)';

export interface SecretCliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** All of stdin. */
  readStdin(): Promise<Buffer>;
}

const KEY = /^[-._a-zA-Z0-9]+$/;

export async function secretCommand(
  argv: string[],
  io: SecretCliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { namespace: { type: 'string', short: 'n' }, server: { type: 'string' } },
  });
  const [verb, name, ...rest] = positionals;
  const server = (values.server ?? env.SLESS_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
  const namespace = values.namespace ?? env.SLESS_NAMESPACE ?? 'default';
  const base = `${server}/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
  const headers: Record<string, string> = env.SLESS_TOKEN
    ? { authorization: `Bearer ${env.SLESS_TOKEN}` }
    : {};
  switch (verb) {
    case 'set': {
      if (!name || rest.length === 0) throw new UsageError('secret set takes a name and at least one KEY=…');
      const data: Record<string, string> = {};
      let usedStdin = false;
      for (const pair of rest) {
        const eq = pair.indexOf('=');
        const key = eq > 0 ? pair.slice(0, eq) : '';
        if (!KEY.test(key))
          throw new UsageError(
            `"${key || pair.slice(0, 20)}": a key is letters, digits, "-", "_" and "." followed by =`,
          );
        if (key in data) throw new UsageError(`key "${key}" given twice`);
        const spec = pair.slice(eq + 1);
        let value: Buffer;
        if (spec === '-') {
          if (usedStdin) throw new UsageError('only one key may read stdin (KEY=-)');
          usedStdin = true;
          const all = await io.readStdin();
          value = all.at(-1) === 0x0a ? all.subarray(0, all.length - 1) : all;
        } else if (spec.startsWith('@')) {
          try {
            value = await readFile(spec.slice(1));
          } catch (error) {
            throw new UsageError(
              `${key}: cannot read ${spec.slice(1)}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
            );
          }
        } else {
          io.stderr(
            `sless secret: ${key}=VALUE leaves the value in your shell history; KEY=@file or KEY=- do not\n`,
          );
          value = Buffer.from(spec, 'utf8');
        }
        data[key] = value.toString('base64');
      }
      const response = await fetch(`${base}/${encodeURIComponent(name)}`, {
        method: 'PUT',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ data }),
      });
      return report(response, io, (body) => {
        const s = body as { name: string; keys: string[]; hash: string };
        return `secret ${namespace}/${s.name} ${response.status === 201 ? 'created' : 'set'}: keys ${s.keys.join(', ')} (hash ${s.hash})\n`;
      });
    }
    case 'delete': {
      if (!name || rest.length > 0) throw new UsageError('secret delete takes exactly one name');
      const response = await fetch(`${base}/${encodeURIComponent(name)}`, { method: 'DELETE', headers });
      return report(response, io, () => `secret ${namespace}/${name} deleted\n`);
    }
    case 'list': {
      if (name) throw new UsageError('secret list takes no name');
      const response = await fetch(base, { headers });
      return report(response, io, (body) =>
        (body as { items: { name: string; keys: string[]; hash: string; managedBy?: string }[] }).items
          .map(
            (s) =>
              `${s.name.padEnd(24)} ${s.hash}  ${s.keys.join(',')}${s.managedBy ? `  (git: ${s.managedBy})` : ''}\n`,
          )
          .join(''),
      );
    }
    default:
      throw new UsageError(`secret: unknown action "${verb ?? ''}"`);
  }
}

async function report(response: Response, io: SecretCliIo, ok: (body: unknown) => string): Promise<number> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: printed as it came
  }
  if (!response.ok) {
    io.stderr(`sless secret: ${response.status} ${(body as { error?: string }).error ?? text}\n`);
    return 1;
  }
  io.stdout(ok(body));
  return 0;
}
