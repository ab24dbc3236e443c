/**
 * SOPS files in a repository, decrypted with the `sops` binary (SOPS's own implementation: its MAC
 * check, its age support), never with crypto of our own. The operator's age key reaches sops
 * through its own environment (`SOPS_AGE_KEY_FILE` or `SOPS_AGE_KEY`), and sops gets nothing else
 * of sless's environment.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocument } from 'yaml';

/** Where the age private key comes from: a file (local), or its text (read from a kube Secret). */
export type AgeKey = { file: string } | { text: () => Promise<string> };

export interface SopsOptions {
  /** The sops binary; `sops` on PATH by default. */
  binary?: string;
  /** None: every SOPS file is refused, saying how to give sless a key. */
  key: AgeKey | undefined;
  /** Default 20 s. */
  timeoutMs?: number;
}

/** True when the YAML text is a SOPS-encrypted document (a top-level `sops` map with a `mac`). */
export function isSopsYaml(text: string): boolean {
  if (!/^sops:/m.test(text)) return false;
  try {
    const doc = parseDocument(text);
    if (doc.errors.length > 0) return false;
    const value = doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown> | null;
    const sops = value?.sops as Record<string, unknown> | undefined;
    return typeof sops === 'object' && sops !== null && 'mac' in sops;
  } catch {
    return false;
  }
}

export class SopsError extends Error {}

export class SopsDecryptor {
  constructor(private readonly options: SopsOptions) {}

  /** The decrypted document as JSON; rejects with a SopsError whose message is sops's own first line. */
  async decrypt(text: string): Promise<unknown> {
    const key = this.options.key;
    if (!key)
      throw new SopsError(
        'no age key to decrypt it with (start sless with --sops-age-key-file FILE or SOPS_AGE_KEY_FILE)',
      );
    const dir = await mkdtemp(join(tmpdir(), 'sless-sops-'));
    try {
      // The file is still encrypted; sops wants a path to tell the format by.
      const file = join(dir, 'secret.yaml');
      await writeFile(file, text, { mode: 0o600 });
      const keyEnv: Record<string, string> =
        'file' in key ? { SOPS_AGE_KEY_FILE: key.file } : { SOPS_AGE_KEY: (await keyText(key.text)).trim() };
      const out = await run(
        this.options.binary ?? 'sops',
        ['decrypt', '--input-type', 'yaml', '--output-type', 'json', file],
        {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: dir,
          // No key services, no cloud KMS: age with the key given, or nothing.
          SOPS_DISABLE_VERSION_CHECK: '1',
          ...keyEnv,
        },
        this.options.timeoutMs ?? 20_000,
      );
      return JSON.parse(out) as unknown;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

async function keyText(read: () => Promise<string>): Promise<string> {
  try {
    return await read();
  } catch (error) {
    throw new SopsError((error as Error).message);
  }
}

function run(
  command: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      err = (err + chunk).slice(0, 4096);
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        new SopsError(
          error.code === 'ENOENT'
            ? `sops not found (looked for "${command}"; install sops 3.x on PATH to decrypt SOPS files)`
            : `cannot run sops: ${error.message}`,
        ),
      );
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(Buffer.concat(out).toString('utf8'));
      reject(new SopsError(sopsReason(err, signal ? `killed by ${signal}` : `exit code ${code}`)));
    });
  });
}

/** sops's own words, in one line: which step failed (data key, MAC), never any content. */
function sopsReason(stderr: string, fallback: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('[warning]'));
  if (lines.some((l) => /MAC mismatch|message authentication failed/i.test(l)))
    return 'the file was changed after it was encrypted (sops: MAC or value authentication failed)';
  if (lines.some((l) => /failed to get the data key|error getting data key|0 successful groups/i.test(l)))
    return "the operator's age key is not one of the file's recipients (sops: failed to get the data key)";
  const first = lines[0] ?? fallback;
  return `sops: ${first.slice(0, 300)}`;
}
