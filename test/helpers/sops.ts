/** The real sops and age-keygen, built from their Go modules by test/pretest.sh into ~/.cache/sless/bin. */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const BIN = join(homedir(), '.cache', 'sless', 'bin');
export const SOPS = join(BIN, 'sops');
export const AGE_KEYGEN = join(BIN, 'age-keygen');

export function sopsAvailable(): boolean {
  return existsSync(SOPS) && existsSync(AGE_KEYGEN);
}

/** A new age identity in `dir`; returns the key file and its public recipient. */
export async function ageKey(dir: string, name = 'age.key'): Promise<{ file: string; recipient: string }> {
  const file = join(dir, name);
  await exec(AGE_KEYGEN, ['-o', file]);
  const recipient = /public key: (age1[0-9a-z]+)/.exec(await readFile(file, 'utf8'))?.[1];
  if (!recipient) throw new Error('age-keygen wrote no public key');
  return { file, recipient };
}

/** Encrypts a YAML document as a Flux user would: `sops encrypt --age R --encrypted-regex '^(data|stringData)$'`. */
export async function sopsEncrypt(dir: string, yaml: string, recipient: string): Promise<string> {
  const file = join(dir, `plain-${Date.now()}-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, yaml, { mode: 0o600 });
  const { stdout } = await exec(
    SOPS,
    ['encrypt', '--age', recipient, '--encrypted-regex', '^(data|stringData)$', file],
    {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
    },
  );
  await rm(file, { force: true });
  return stdout;
}

export function secretYaml(name: string, stringData: Record<string, string>, namespace?: string): string {
  const lines = ['apiVersion: v1', 'kind: Secret', 'metadata:', `  name: ${name}`];
  if (namespace) lines.push(`  namespace: ${namespace}`);
  lines.push('stringData:', ...Object.entries(stringData).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`));
  return `${lines.join('\n')}\n`;
}
