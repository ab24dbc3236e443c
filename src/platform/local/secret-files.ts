/**
 * A local function process's secrets: `secretRef` variables resolved from the store at each start,
 * and `spec.secrets` written as files into a directory of the process's own (0700 for the tenant's
 * uid, files 0400), shown read-only at the mountPath inside the sandbox and removed when the process
 * exits. The directory is on /dev/shm where there is one, so the values never reach a disk, and
 * never under the state directory.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ProcessLauncher } from '../../core/interfaces.js';
import { OwnedTempDirs } from '../../core/owned-temp-dirs.js';
import type { SlessFunction } from '../../core/resources.js';
import { describeMissing, type SecretValues, secretRefsOf } from '../../secrets/references.js';

/** The store as a process start reads it: synchronously, from memory. */
export interface SecretSource {
  getSync(namespace: string, name: string): SecretValues | undefined;
}

/** The values of the function's `secretRef` variables; throws naming a secret or key that is missing. */
export function secretEnv(fn: SlessFunction, source: SecretSource | undefined): Record<string, string> {
  const refs = secretRefsOf(fn).env;
  const env: Record<string, string> = {};
  for (const ref of refs) {
    const secret = source?.getSync(fn.metadata.namespace, ref.name);
    const value = secret?.data[ref.key];
    if (!secret || !value)
      throw new Error(
        describeMissing(fn.metadata.namespace, { name: ref.name, ...(secret ? { key: ref.key } : {}) }),
      );
    env[ref.env] = Buffer.from(value).toString('utf8');
  }
  return env;
}

export class SecretFiles {
  private readonly dirs = new OwnedTempDirs('sless-sec-', existsSync('/dev/shm') ? '/dev/shm' : undefined);

  /** undefined when the function mounts no secret. */
  async prepare(
    fn: SlessFunction,
    source: SecretSource | undefined,
    launcher: ProcessLauncher,
  ): Promise<{ dir: string; mounts: { source: string; target: string }[] } | undefined> {
    const volumes = secretRefsOf(fn).volumes;
    if (volumes.length === 0) return undefined;
    if (!launcher.report.sandboxed)
      throw new Error('secret files (spec.secrets) need the sandbox (bubblewrap) on the local platform');
    const secrets = volumes.map((volume) => {
      const secret = source?.getSync(fn.metadata.namespace, volume.name);
      if (!secret) throw new Error(describeMissing(fn.metadata.namespace, { name: volume.name }));
      return { volume, secret };
    });
    const dir = await this.dirs.create();
    try {
      const mounts: { source: string; target: string }[] = [];
      for (const [i, { volume, secret }] of secrets.entries()) {
        const sub = join(dir, String(i));
        await mkdir(sub, { mode: 0o700 });
        for (const [key, value] of Object.entries(secret.data))
          await writeFile(join(sub, key), value, { mode: 0o400, flag: 'wx' });
        mounts.push({ source: sub, target: volume.mountPath });
      }
      // The tenant's uid owns them; nobody else (but root) reads them.
      await launcher.grant(fn.metadata.namespace, dir);
      await chmod(dir, 0o700);
      for (const [i] of secrets.entries()) await chmod(join(dir, String(i)), 0o500);
      return { dir, mounts };
    } catch (error) {
      await this.dirs.remove(dir);
      throw error;
    }
  }

  remove(dir: string): Promise<void> {
    return this.dirs.remove(dir);
  }

  removeAll(): Promise<void> {
    return this.dirs.removeAll();
  }
}
