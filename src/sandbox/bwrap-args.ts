/**
 * The bubblewrap command line that confines one tenant process, built as a pure function of the
 * host's layout and the process's paths, so that what the sandbox exposes can be read and tested in
 * one place.
 */
import { dirname } from 'node:path';

/** Host layout the sandbox's read-only system view is built from. */
export interface SystemView {
  /** Top-level entries that are symlinks on the host (merged /usr): name → target. */
  symlinks: Record<string, string>;
  /** Top-level system directories bound read-only (e.g. /usr, and /lib when it is not a symlink). */
  systemDirs: string[];
  /** Individual /etc entries a toolchain needs (certificates, time zone); never passwd or shadow. */
  etcEntries: string[];
  /** Generated files (passwd, group, hosts, resolv.conf) mounted over /etc/<name>. */
  generatedEtc: Record<string, string>;
  /** Toolchain installs outside the system dirs (pyenv, nvm, a Go root), bound read-only. */
  toolchainDirs: string[];
  /** Absolute paths of util-linux's setpriv and unshare. */
  setpriv: string;
  unshare: string;
}

export interface SandboxArgs {
  view: SystemView;
  cwd: string;
  readable: string[];
  writable: string[];
  /** Host directories bound read-only at another path (secret files at their mountPath). */
  mounts?: { source: string; target: string }[];
  /** Host uid and gid the tenant's process runs as. */
  uid: number;
  /** Set when a network helper must attach before the command runs (bwrap's info and block fds). */
  waitForNetwork: boolean;
  command: string;
  args: string[];
}

/** The uid inside the sandbox's own user namespace (the generated /etc/passwd names it). */
export const SANDBOX_UID = 1000;

function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let dir = dirname(path); dir !== '/' && dir !== '.'; dir = dirname(dir)) out.unshift(dir);
  return out;
}

/**
 * The bwrap command line for one tenant process. bwrap runs as root so that it can bind paths the
 * tenant's uid could not even traverse, then the command drops to the tenant's unprivileged uid (no
 * capabilities, no new privileges) and enters a user namespace of its own. Host paths keep their
 * paths inside, so build directories and sockets need no translation.
 */
export function bwrapArgs(options: SandboxArgs): string[] {
  const args = [
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-net',
    '--unshare-cgroup-try',
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'sless',
  ];
  if (options.waitForNetwork) args.push('--info-fd', '3', '--block-fd', '4');
  for (const dir of options.view.systemDirs) args.push('--ro-bind', dir, dir);
  for (const [name, target] of Object.entries(options.view.symlinks).sort())
    args.push('--symlink', target, name);
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp');
  args.push('--perms', '0755', '--dir', '/etc');
  for (const entry of options.view.etcEntries) args.push('--ro-bind', entry, entry);
  for (const [name, file] of Object.entries(options.view.generatedEtc).sort())
    args.push('--ro-bind', file, `/etc/${name}`);
  const made = new Set(['/tmp', '/etc', '/usr', '/proc', '/dev']);
  const bind = (flag: string, path: string) => {
    for (const dir of ancestors(path)) {
      if (made.has(dir)) continue;
      made.add(dir);
      // Without explicit permissions bwrap copies the host's (e.g. 0700 /root), locking the tenant out.
      args.push('--perms', '0755', '--dir', dir);
    }
    made.add(path);
    args.push(flag, path, path);
  };
  for (const path of [...options.view.toolchainDirs, ...options.readable]) bind('--ro-bind', path);
  for (const path of options.writable) bind('--bind', path);
  for (const mount of options.mounts ?? []) {
    for (const dir of ancestors(mount.target)) {
      if (made.has(dir)) continue;
      made.add(dir);
      args.push('--perms', '0755', '--dir', dir);
    }
    made.add(mount.target);
    args.push('--ro-bind', mount.source, mount.target);
  }
  args.push('--chdir', options.cwd, '--');
  args.push(
    options.view.setpriv,
    `--reuid=${options.uid}`,
    `--regid=${options.uid}`,
    '--clear-groups',
    '--bounding-set=-all',
    '--inh-caps=-all',
    '--no-new-privs',
    '--',
    options.view.unshare,
    '--user',
    `--map-user=${SANDBOX_UID}`,
    `--map-group=${SANDBOX_UID}`,
    '--',
    options.command,
    ...options.args,
  );
  return args;
}
