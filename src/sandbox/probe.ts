/**
 * Finds out at start-up what this machine lets sless enforce on tenant code (sandbox, network,
 * memory and process limits), picks the launcher to match, and says plainly what is and is not
 * enforced. It also prepares what the sandbox sees: the system view, the generated /etc files and
 * the toolchains' paths, remembered across restarts so that finding them does not delay a restart.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  writeFileSync,
} from 'node:fs';
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

/** Where the toolchains live: their bin directories, and the install directories bound read-only. */
export interface Toolchains {
  binDirs: string[];
  dirs: string[];
}

/**
 * Where the toolchains live: Node (this process), Python 3 and Go as found on PATH. Their bin
 * directories lead the sandbox's PATH; installs outside /usr (pyenv, nvm) are bound read-only.
 */
async function toolchains(): Promise<Toolchains> {
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

const TOOLCHAINS_FILE = 'toolchains.json';

/** What the toolchains found depend on; a remembered answer counts only while these are the same. */
const toolchainsKey = () => ({ path: process.env.PATH ?? '', node: process.execPath });

/**
 * The toolchains the last start found, while PATH and this Node are the same and every directory
 * still exists. Asking python3 where it lives costs most of a second when it is a pyenv shim, and a
 * restart must not wait for that before its functions start again; the answer is checked afterwards.
 */
export function rememberedToolchains(runDir: string): Toolchains | undefined {
  try {
    const saved = JSON.parse(readFileSync(join(runDir, TOOLCHAINS_FILE), 'utf8')) as Record<string, unknown>;
    const key = toolchainsKey();
    if (saved.path !== key.path || saved.node !== key.node) return undefined;
    const dirs = (list: unknown): list is string[] =>
      Array.isArray(list) &&
      list.every((dir) => typeof dir === 'string' && dir.startsWith('/') && existsSync(dir));
    if (!dirs(saved.binDirs) || !dirs(saved.dirs)) return undefined;
    return { binDirs: saved.binDirs, dirs: saved.dirs };
  } catch {
    return undefined;
  }
}

export function rememberToolchains(runDir: string, tools: Toolchains): void {
  mkdirSync(runDir, { recursive: true, mode: 0o755 });
  writeFileSync(join(runDir, TOOLCHAINS_FILE), JSON.stringify({ ...toolchainsKey(), ...tools }), {
    mode: 0o644,
  });
}

const sameToolchains = (a: Toolchains, b: Toolchains) => JSON.stringify(a) === JSON.stringify(b);

function sandboxPath(tools: Toolchains): string {
  return [...tools.binDirs, ...SYSTEM_PATH].filter((dir, i, all) => all.indexOf(dir) === i).join(':');
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

/** A launcher as sless uses it: closed at the end; its toolchains checked once functions serve. */
export type SandboxLauncher = ProcessLauncher & {
  close(): Promise<void>;
  /**
   * Finds the toolchains again when this start used those the last one found, and uses what it
   * finds for every launch from now on. Called once the restored functions serve, so the lookup
   * (a pyenv shim costs most of a second) does not compete with their start.
   */
  checkToolchains(): Promise<void>;
};

/**
 * Finds out what this machine lets sless enforce on tenant processes and returns the launcher that
 * enforces it: bubblewrap when it works here, plain children otherwise (the caller decides whether
 * that is acceptable). cgroup limits apply either way when the controllers are writable.
 */
export async function createLauncher(options: IsolationOptions): Promise<SandboxLauncher> {
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
  let tools: Toolchains | undefined;
  let remembered = false;
  let failure: string | undefined;
  let view: SystemView | undefined;
  if (options.disabled) failure = options.disabled;
  else if (process.platform !== 'linux') failure = 'sandboxing needs Linux';
  else if (!bwrap) failure = 'bwrap (bubblewrap) is not installed';
  else if (!setpriv || !unshare) failure = 'setpriv or unshare (util-linux) is not installed';
  else if (process.getuid?.() !== 0)
    failure = 'sless is not running as root, which the sandbox needs to switch tenants to their own uid';
  else {
    const previous = rememberedToolchains(options.runDir);
    remembered = previous !== undefined;
    tools = previous ?? (await toolchains());
    view = systemView(options.runDir, tools.dirs, setpriv, unshare);
    if (!previous) rememberToolchains(options.runDir, tools);
    const error = await trySandbox(bwrap, view);
    if (error) failure = `a trial sandbox failed: ${error}`;
  }
  if (failure || !bwrap || !view || !tools) {
    notEnforced.unshift(
      `sandbox: ${failure}; functions and builds run as sless's own user and can read its environment and files (${HOW_TO})`,
    );
    const direct = new DirectLauncher({ cgroups, report: { sandboxed: false, enforced, notEnforced } });
    return Object.assign(direct, { checkToolchains: async () => undefined });
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
  const launcher = new BubblewrapLauncher({
    bwrap,
    slirp4netns,
    view,
    path: sandboxPath(tools),
    cgroups,
    logger: options.logger,
    report: { sandboxed: true, enforced, notEnforced },
  });
  const used = tools;
  const { setpriv: setprivPath, unshare: unsharePath } = view;
  const release = launcher.close.bind(launcher);
  let checking: Promise<void> | undefined;
  const check = async () => {
    const found = await toolchains();
    if (sameToolchains(found, used)) return;
    options.logger.warn(
      { before: used.binDirs, now: found.binDirs },
      'python3 or go on PATH moved since the last start: functions started from now on use the new one',
    );
    launcher.useView(systemView(options.runDir, found.dirs, setprivPath, unsharePath), sandboxPath(found));
    rememberToolchains(options.runDir, found);
  };
  return Object.assign(launcher, {
    checkToolchains: () => {
      if (remembered)
        checking ??= check().catch((error: unknown) =>
          options.logger.warn({ err: (error as Error).message }, 'finding the toolchains again failed'),
        );
      return checking ?? Promise.resolve();
    },
    // A check still running would write into the state directory after sless stopped.
    close: async () => {
      await checking;
      await release();
    },
  });
}
