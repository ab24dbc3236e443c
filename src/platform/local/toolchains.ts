/**
 * The toolchain each runtime needs on this machine for the local platform: the Node.js, Python or Go
 * binary of the runtime's line, found once per process, or the reason there is none, in words that
 * say what to install. The kube platform needs none of these: its images carry them.
 *
 * Where each is looked for, first hit wins:
 * - Node.js N: `SLESS_NODE<N>_BINARY`; this process's own node when it is N; `node<N>` on PATH; `node`
 *   on PATH when it is N.
 * - Python 3.M: `SLESS_PYTHON3<M>_BINARY`; `python3.M` on PATH; `python3` when it is 3.M.
 * - Go 1.M: `go` on PATH. go1.21 builds with whatever Go the machine has (as before); a newer line
 *   builds with that `go` when it is of the line (any patch release), and otherwise asks it for the
 *   release the kube image pins (GOTOOLCHAIN), which the go command takes from the Go module proxy.
 */
import { spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { dirname, isAbsolute } from 'node:path';
import { RUNTIME_INFO } from '../../core/runtimes.js';
import type { RuntimeName } from '../../core/schemas.js';

export type Toolchain =
  | { found: true; command: string; env: Record<string, string>; version: string }
  | { found: false; reason: string };

const cache = new Map<string, Toolchain>();

/** The version a binary reports (`node --version`, `python --version`, `go version`), or undefined. */
function versionOf(command: string, args: string[]): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 10_000 });
  if (result.status !== 0) return undefined;
  const match = /(\d+\.\d+(?:\.\d+)?)/.exec(`${result.stdout} ${result.stderr}`);
  return match?.[1];
}

const lineOf = (version: string | undefined, parts: number) => version?.split('.').slice(0, parts).join('.');

export function resolveToolchain(runtime: RuntimeName, env: NodeJS.ProcessEnv = process.env): Toolchain {
  const overrides = Object.entries(env).filter(([name]) => /^SLESS_(NODE|PYTHON)\d+_BINARY$/.test(name));
  const key = `${runtime}\0${env.PATH ?? ''}\0${JSON.stringify(overrides.sort())}`;
  const known = cache.get(key);
  if (known) return known;
  const found = lookUp(runtime, env);
  cache.set(key, found);
  return found;
}

function lookUp(runtime: RuntimeName, env: NodeJS.ProcessEnv): Toolchain {
  const info = RUNTIME_INFO[runtime];
  const wanted = info.toolchain;
  const withPath = (command: string) => ({ found: true as const, command, env: {} });
  switch (info.family) {
    case 'node': {
      const variable = `SLESS_NODE${wanted}_BINARY`;
      const candidates = [
        env[variable],
        lineOf(process.versions.node, 1) === wanted ? process.execPath : undefined,
        `node${wanted}`,
        'node',
      ].filter((c): c is string => Boolean(c));
      const seen: string[] = [];
      for (const command of candidates) {
        const version =
          command === process.execPath ? process.versions.node : versionOf(command, ['--version']);
        if (version) seen.push(`${command}: ${version}`);
        if (lineOf(version, 1) === wanted && version) return { ...withPath(command), version };
      }
      return {
        found: false,
        reason: `runtime ${runtime} needs Node.js ${wanted} on this machine: set ${variable} to its node binary or put node${wanted} on PATH${seen.length > 0 ? ` (found ${seen.join(', ')})` : ''}`,
      };
    }
    case 'python': {
      const variable = `SLESS_PYTHON${wanted.replace('.', '')}_BINARY`;
      const candidates = [env[variable], `python${wanted}`, 'python3'].filter((c): c is string => Boolean(c));
      const seen: string[] = [];
      for (const command of candidates) {
        const version = versionOf(command, ['--version']);
        if (version) seen.push(`${command}: ${version}`);
        if (version && lineOf(version, 2) === wanted) return { ...withPath(command), version };
      }
      return {
        found: false,
        reason: `runtime ${runtime} needs Python ${wanted} on this machine: set ${variable} to its python binary or put python${wanted} on PATH${seen.length > 0 ? ` (found ${seen.join(', ')})` : ''}`,
      };
    }
    case 'go': {
      const pinned = `go${info.version.split('-')[0]}`;
      // Toolchain switching exists from Go 1.21 on.
      const needs =
        runtime === 'go1.21'
          ? 'Go'
          : `Go ${wanted} (or any Go from 1.21 on, which fetches ${pinned} through GOTOOLCHAIN)`;
      const version = versionOf('go', ['version']);
      if (!version)
        return { found: false, reason: `runtime ${runtime} needs ${needs} on this machine: put go on PATH` };
      if (runtime === 'go1.21' || lineOf(version, 2) === wanted) return { ...withPath('go'), version };
      const [major, minor] = (version.split('.').map(Number) as [number, number]) ?? [0, 0];
      if (major > 1 || (major === 1 && minor >= 21))
        return { found: true, command: 'go', env: { GOTOOLCHAIN: pinned }, version: pinned.slice(2) };
      return {
        found: false,
        reason: `runtime ${runtime} needs ${needs} on this machine: found go ${version}`,
      };
    }
  }
}

/**
 * The directory a sandboxed process must be able to read for a toolchain kept outside the system's
 * directories (a Node.js unpacked from npm, a pyenv Python with its standard library beside it):
 * the installation holding the binary. Undefined for a command found on PATH.
 */
export function toolchainRoot(toolchain: Toolchain): string | undefined {
  if (!toolchain.found || !isAbsolute(toolchain.command) || toolchain.command === process.execPath)
    return undefined;
  return dirname(dirname(realpathSync(toolchain.command)));
}
