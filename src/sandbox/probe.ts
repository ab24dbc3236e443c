import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { IsolationReport, ProcessLauncher } from '../core/interfaces.js';
import { bwrapArgs, SANDBOX_UID, type SystemView } from './bwrap-args.js';
import { CgroupLimits } from './cgroups.js';
import { BubblewrapLauncher, DirectLauncher, tenantUid } from './launcher.js';

/** What a tenant process needs from /etc, and nothing that describes the host's users or secrets. */
const ETC_ENTRIES = [
  'alternatives',
  'ca-certificates',
  'ca-certificates.conf',
  'gai.conf',
  'host.conf',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'mime.types',
  'nsswitch.conf',
  'protocols',
  'services',
  'ssl',
];
const TOP_LEVEL = ['bin', 'lib', 'lib32', 'lib64', 'libx32', 'sbin'];
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

function which(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, command);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Runs a probe without blocking the event loop: sless binds its port and loads its API while the
 * probes run, and they run side by side.
 */
function run(
  command: string,
  args: string[],
  env?: NodeJS.ProcessEnv,
): Promise<{ stdout: string; stderr: string; failure?: Error }> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { encoding: 'utf8', timeout: 10_000, ...(env ? { env } : {}) },
      (error, stdout, stderr) =>
        resolve({ stdout: stdout.trim(), stderr: stderr.trim(), ...(error ? { failure: error } : {}) }),
    );
  });
}

async function output(command: string, args: string[]): Promise<string | undefined> {
  const result = await run(command, args);
  return result.failure ? undefined : result.stdout;
}

const outsideSystem = (path: string) => !/^\/(usr|bin|lib|lib64|sbin)(\/|$)/.test(path);

/**
 * Where the toolchains live: Node (this process), Python 3 and Go as found on PATH. Their bin
 * directories lead the sandbox's PATH; installs outside /usr (pyenv, nvm) are bound read-only.
 */
async function toolchains(): Promise<{ binDirs: string[]; dirs: string[] }> {
  // The first match on the sandbox's PATH wins: the same python3 and go as on sless's own PATH.
  const binDirs: string[] = [];
  const dirs: string[] = [];
  const node = realpathSync(process.execPath);
  if (outsideSystem(node)) dirs.push(dirname(dirname(node)));
  const [python, goRoot] = await Promise.all([
    output('python3', ['-c', 'import sys; print(sys.executable); print(sys.base_prefix)']),
    output('go', ['env', 'GOROOT']),
  ]);
  if (python) {
    const [executable = '', prefix = ''] = python.split('\n');
    if (executable) binDirs.push(dirname(executable));
    if (prefix && outsideSystem(prefix)) dirs.push(prefix);
  }
  if (goRoot) {
    binDirs.push(join(goRoot, 'bin'));
    if (outsideSystem(goRoot)) dirs.push(goRoot);
  }
  binDirs.push(dirname(process.execPath));
  return { binDirs: [...new Set(binDirs)], dirs: [...new Set(dirs)].sort() };
}

function systemView(runDir: string, toolchainDirs: string[], setpriv: string, unshare: string): SystemView {
  const symlinks: Record<string, string> = {};
  const systemDirs = ['/usr'];
  for (const name of TOP_LEVEL) {
    const path = `/${name}`;
    if (!existsSync(path)) continue;
    if (lstatSync(path).isSymbolicLink()) symlinks[path] = readlinkSync(path);
    else systemDirs.push(path);
  }
  const etcDir = join(runDir, 'etc');
  mkdirSync(etcDir, { recursive: true, mode: 0o755 });
  const generated: Record<string, string> = {
    passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\nsless:x:${SANDBOX_UID}:${SANDBOX_UID}:sless tenant:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\nsless:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`,
    hosts: '127.0.0.1\tlocalhost\n::1\tlocalhost\n',
    // slirp4netns answers DNS at 10.0.2.3; without a network nothing resolves anyway.
    'resolv.conf': 'nameserver 10.0.2.3\n',
  };
  const generatedEtc: Record<string, string> = {};
  for (const [name, content] of Object.entries(generated)) {
    const file = join(etcDir, name);
    writeFileSync(file, content, { mode: 0o644 });
    generatedEtc[name] = file;
  }
  return {
    symlinks,
    systemDirs,
    etcEntries: ETC_ENTRIES.map((name) => `/etc/${name}`).filter((path) => existsSync(path)),
    generatedEtc,
    toolchainDirs,
    setpriv,
    unshare,
  };
}

const HOW_TO =
  'install bubblewrap, slirp4netns and util-linux (Debian: apt-get install bubblewrap slirp4netns util-linux) and run sless as root on a kernel with user namespaces';

/** Runs `true` in a sandbox exactly as tenant code will run; returns why it failed, if it did. */
async function trySandbox(bwrap: string, view: SystemView): Promise<string | undefined> {
  const args = bwrapArgs({
    view,
    cwd: '/',
    readable: [],
    writable: [],
    uid: tenantUid('sless-probe'),
    waitForNetwork: false,
    command: 'true',
    args: [],
  });
  const result = await run(bwrap, args, { PATH: SYSTEM_PATH.join(':') });
  if (!result.failure) return undefined;
  return result.stderr || result.failure.message;
}

export interface IsolationOptions {
  /** Where generated sandbox files (passwd, hosts) are written: `{stateDir}/sandbox`. */
  runDir: string;
  logger: Logger;
  cgroups?: CgroupLimits;
  /** Why the sandbox is not to be used at all, when the user turned it off. */
  disabled?: string;
}

/** The plain-language summary logged at start-up. */
export function describeIsolation(report: IsolationReport): string {
  const lines = [
    report.sandboxed ? 'tenant code runs sandboxed' : 'TENANT CODE IS NOT SANDBOXED',
    ...report.enforced.map((line) => `  enforced: ${line}`),
    ...report.notEnforced.map((line) => `  NOT enforced: ${line}`),
  ];
  return lines.join('\n');
}

/**
 * Finds out what this machine lets sless enforce on tenant processes and returns the launcher that
 * enforces it: bubblewrap when it works here, plain children otherwise (the caller decides whether
 * that is acceptable). cgroup limits apply either way when the controllers are writable.
 */
export async function createLauncher(
  options: IsolationOptions,
): Promise<ProcessLauncher & { close(): Promise<void> }> {
  const cgroups = options.cgroups ?? new CgroupLimits();
  cgroups.sweepStale();
  const enforced: string[] = [];
  const notEnforced: string[] = [];
  if (cgroups.has('memory')) enforced.push(`memory: memoryMb through ${cgroups.describe('memory')}`);
  else
    notEnforced.push(
      `memory: ${cgroups.missing.get('memory')}; only Node functions are capped (V8 heap, --max-old-space-size)`,
    );
  if (cgroups.has('pids')) enforced.push(`processes: ${cgroups.describe('pids')}`);
  else notEnforced.push(`processes: ${cgroups.missing.get('pids')}`);

  const bwrap = which('bwrap');
  const setpriv = which('setpriv');
  const unshare = which('unshare');
  // Only a sandbox needs to know where the toolchains are: plain children use sless's own PATH.
  let tools: { binDirs: string[]; dirs: string[] } | undefined;
  let failure: string | undefined;
  let view: SystemView | undefined;
  if (options.disabled) failure = options.disabled;
  else if (process.platform !== 'linux') failure = 'sandboxing needs Linux';
  else if (!bwrap) failure = 'bwrap (bubblewrap) is not installed';
  else if (!setpriv || !unshare) failure = 'setpriv or unshare (util-linux) is not installed';
  else if (process.getuid?.() !== 0)
    failure = 'sless is not running as root, which the sandbox needs to switch tenants to their own uid';
  else {
    tools = await toolchains();
    view = systemView(options.runDir, tools.dirs, setpriv, unshare);
    const error = await trySandbox(bwrap, view);
    if (error) failure = `a trial sandbox failed: ${error}`;
  }
  if (failure || !bwrap || !view || !tools) {
    notEnforced.unshift(
      `sandbox: ${failure}; functions and builds run as sless's own user and can read its environment and files (${HOW_TO})`,
    );
    return new DirectLauncher({ cgroups, report: { sandboxed: false, enforced, notEnforced } });
  }
  const slirp4netns = which('slirp4netns');
  enforced.unshift(
    'sandbox: bubblewrap; pid, ipc, uts, mount, network and user namespaces; a uid of its own per namespace, no capabilities; read-only system; private /tmp; writes only to its own build or socket directory',
    'function network: none (own network namespace; served over a unix socket)',
  );
  if (slirp4netns) enforced.push('build network: slirp4netns, with no access to the host loopback');
  else
    notEnforced.push(
      `build network: slirp4netns is not installed, so builds cannot download dependencies (${HOW_TO})`,
    );
  const path = [...tools.binDirs, ...SYSTEM_PATH].filter((dir, i, all) => all.indexOf(dir) === i).join(':');
  return new BubblewrapLauncher({
    bwrap,
    slirp4netns,
    view,
    path,
    cgroups,
    logger: options.logger,
    report: { sandboxed: true, enforced, notEnforced },
  });
}
