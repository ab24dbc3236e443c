/**
 * How every tenant process is started, functions and build steps alike: in a bubblewrap sandbox
 * under its namespace's own uid where the machine allows it, as a plain child otherwise, and under
 * cgroup limits either way. A build that must download gets a user-mode network that cannot reach
 * the host's loopback.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { lchown, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from 'pino';
import { sha256Hex } from '../core/hash.js';
import type { IsolationReport, LaunchSpec, ProcessLauncher } from '../core/interfaces.js';
import { bwrapArgs, type SystemView } from './bwrap-args.js';
import type { CgroupLimits, ProcessGroups } from './cgroups.js';

/**
 * Joins the process to its cgroups before anything else runs: the shell writes its own pid into each
 * `cgroup.procs` file, then becomes the sandbox. A limit thus covers every process the tenant starts.
 */
const JOIN_CGROUPS =
  'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"';

/** Host uids for tenant processes: one per namespace, far from system and login users. */
export function tenantUid(namespace: string): number {
  return 200_000 + (Number.parseInt(sha256Hex(namespace).slice(0, 8), 16) % 100_000);
}

async function chownTree(path: string, uid: number): Promise<void> {
  await lchown(path, uid, uid);
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(path, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) await chownTree(child, uid);
    else await lchown(child, uid, uid);
  }
}

/** Removes a process's groups once its last task is gone (the pid namespace dies just after it). */
function releaseSoon(groups: ProcessGroups): void {
  groups.release();
  for (const delay of [200, 2000]) setTimeout(() => groups.release(), delay).unref();
}

function withCgroups(groups: ProcessGroups, command: string[]): string[] {
  if (groups.procsFiles.length === 0) return command;
  return [
    '/bin/sh',
    '-c',
    JOIN_CGROUPS,
    'sless-sandbox',
    String(groups.procsFiles.length),
    ...groups.procsFiles,
    ...command,
  ];
}

/** Reads a stream until `done` accepts what arrived, or it ends. */
function readUntil(stream: Readable, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (done(text)) finish();
    };
    const finish = () => {
      stream.off('data', onData);
      stream.off('end', finish);
      stream.off('error', reject);
      resolve(text);
    };
    stream.on('data', onData);
    stream.once('end', finish);
    stream.once('error', reject);
  });
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

export interface BubblewrapLauncherOptions {
  bwrap: string;
  /** slirp4netns, for build steps that download packages; undefined: builds get no network. */
  slirp4netns: string | undefined;
  view: SystemView;
  /** PATH inside the sandbox: the toolchains' bin directories, then the system's. */
  path: string;
  cgroups: CgroupLimits;
  report: IsolationReport;
  logger: Logger;
}

/** Tenant processes in a bubblewrap sandbox, under their namespace's uid and their cgroup limits. */
export class BubblewrapLauncher implements ProcessLauncher {
  readonly report: IsolationReport;
  private options: BubblewrapLauncherOptions;

  constructor(options: BubblewrapLauncherOptions) {
    this.options = options;
    this.report = options.report;
  }

  async grant(tenant: string, path: string): Promise<void> {
    await chownTree(path, tenantUid(tenant));
  }

  /** Removes the cgroups this launcher made. */
  close(): Promise<void> {
    return this.options.cgroups.releaseAll();
  }

  /** What every launch from now on sees: another system view and PATH (the toolchains moved). */
  useView(view: SystemView, path: string): void {
    this.options = { ...this.options, view, path };
  }

  launch(spec: LaunchSpec): ChildProcess {
    const groups = this.options.cgroups.create({
      ...(spec.memoryMb === undefined ? {} : { memoryMb: spec.memoryMb }),
      ...(spec.maxProcesses === undefined ? {} : { maxProcesses: spec.maxProcesses }),
    });
    const network = spec.network === 'outbound' ? this.options.slirp4netns : undefined;
    const args = bwrapArgs({
      view: this.options.view,
      cwd: spec.cwd,
      readable: spec.readable,
      writable: spec.writable,
      ...(spec.mounts ? { mounts: spec.mounts } : {}),
      uid: tenantUid(spec.tenant),
      waitForNetwork: network !== undefined,
      command: spec.command,
      args: spec.args,
    });
    const [command = '', ...rest] = withCgroups(groups, [this.options.bwrap, ...args]);
    const child = spawn(command, rest, {
      cwd: '/',
      // The sandbox's first process shows its environment to the tenant (/proc/1/environ): it gets
      // exactly the tenant's environment and nothing of sless's.
      env: { ...spec.env, PATH: this.options.path, HOME: '/tmp', TMPDIR: '/tmp' },
      stdio: network ? [...spec.stdio, 'pipe', 'pipe'] : spec.stdio,
    });
    child.once('exit', () => releaseSoon(groups));
    child.once('error', () => releaseSoon(groups));
    if (network) {
      this.attachNetwork(child, network).catch((error: Error) => {
        this.options.logger.warn({ err: error.message }, 'sandbox network failed; stopping the process');
        child.kill('SIGKILL');
      });
    }
    return child;
  }

  /**
   * Gives the sandbox's network namespace a user-mode network (slirp4netns): outbound connections
   * are made by slirp4netns on the host's behalf, and `--disable-host-loopback` refuses the host's
   * 127.0.0.1, where sless and other tenants' services listen.
   */
  private async attachNetwork(child: ChildProcess, slirp4netns: string): Promise<void> {
    const info = child.stdio[3] as Readable | null;
    const block = child.stdio[4] as Writable | null;
    if (!info || !block) throw new Error('no info/block pipe to the sandbox');
    const text = await readUntil(info, parses);
    const pid = (JSON.parse(text) as { 'child-pid'?: number })['child-pid'];
    if (!pid) throw new Error(`bwrap reported no child pid: ${text.slice(0, 200)}`);
    const helper = spawn(
      slirp4netns,
      [
        '--configure',
        '--mtu=65520',
        '--disable-host-loopback',
        '--enable-sandbox',
        '--enable-seccomp',
        '--ready-fd=3',
        '--exit-fd=4',
        String(pid),
        'tap0',
      ],
      { env: { PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
    );
    let helperErrors = '';
    helper.stderr?.on('data', (chunk: Buffer) => {
      helperErrors = (helperErrors + chunk.toString('utf8')).slice(-2000);
    });
    const exitPipe = helper.stdio[4] as Writable;
    exitPipe.on('error', () => undefined);
    const stopHelper = () => {
      exitPipe.end();
      helper.kill('SIGTERM');
    };
    child.once('exit', stopHelper);
    const ready = readUntil(helper.stdio[3] as Readable, (t) => t.includes('1'));
    const failed = new Promise<never>((_, reject) =>
      helper.once('exit', (code) =>
        reject(
          new Error(`slirp4netns exited (${code}) before the network was ready: ${helperErrors.trim()}`),
        ),
      ),
    );
    failed.catch(() => undefined);
    await Promise.race([ready, failed]);
    block.on('error', () => undefined);
    block.end('1');
  }
}

/** Tenant processes as plain children (no sandbox here), still under cgroup limits when available. */
export class DirectLauncher implements ProcessLauncher {
  readonly report: IsolationReport;
  private readonly cgroups: CgroupLimits;

  constructor(options: { cgroups: CgroupLimits; report: IsolationReport }) {
    this.cgroups = options.cgroups;
    this.report = options.report;
  }

  async grant(): Promise<void> {
    // Everything runs as sless's own user; there is nobody to grant to.
  }

  close(): Promise<void> {
    return this.cgroups.releaseAll();
  }

  launch(spec: LaunchSpec): ChildProcess {
    const groups = this.cgroups.create({
      ...(spec.memoryMb === undefined ? {} : { memoryMb: spec.memoryMb }),
      ...(spec.maxProcesses === undefined ? {} : { maxProcesses: spec.maxProcesses }),
    });
    // Without mount namespaces a directory cannot be shown at another path: refused, never faked.
    if (spec.mounts && spec.mounts.length > 0) {
      releaseSoon(groups);
      throw new Error('secret files (spec.secrets) need the sandbox (bubblewrap) on the local platform');
    }
    const [command = '', ...args] = withCgroups(groups, [spec.command, ...spec.args]);
    const child = spawn(command, args, { cwd: spec.cwd, env: spec.env, stdio: spec.stdio });
    child.once('exit', () => releaseSoon(groups));
    child.once('error', () => releaseSoon(groups));
    return child;
  }
}
