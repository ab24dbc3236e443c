/**
 * What a Secret volume looks like from both sides on the test node, for a test whose function cannot
 * read its secret file: on the host, each pod's Secret volume directory under the kubelet's root, its
 * entries and the mount it is (device and filesystem type); in each container that mounts
 * `mountPath`, the entries it sees there and the device its mount comes from. A container on another
 * device than the host's volume, or a host volume that is no mount at all, tells where the files went.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Mount {
  device: string;
  root: string;
  mountPoint: string;
  fsType: string;
}

function mountsOf(mountinfo: string): Mount[] {
  return mountinfo
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [left, right = ''] = line.split(' - ');
      const fields = (left ?? '').split(' ');
      return {
        device: fields[2] ?? '?',
        root: fields[3] ?? '?',
        mountPoint: (fields[4] ?? '').replace(/\\040/g, ' '),
        fsType: right.split(' ')[0] ?? '?',
      };
    });
}

function entries(dir: string): string {
  try {
    return readdirSync(dir).sort().join(', ') || '(empty)';
  } catch (error) {
    return `(${(error as NodeJS.ErrnoException).code ?? String(error)})`;
  }
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** One line per host Secret volume of the node and per container mounting `mountPath`. */
export function secretVolumeViews(nodeRoot: string, mountPath: string): string {
  const lines: string[] = [];
  const hostMounts = mountsOf(read('/proc/self/mountinfo') ?? '');
  const podsDir = join(nodeRoot, 'kubelet', 'pods');
  for (const pod of readdirSync(podsDir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    const secretsDir = join(podsDir, pod.name, 'volumes', 'kubernetes.io~secret');
    let volumes: string[];
    try {
      volumes = readdirSync(secretsDir).sort();
    } catch {
      continue;
    }
    for (const volume of volumes) {
      const dir = join(secretsDir, volume);
      const mount = hostMounts.filter((m) => m.mountPoint === dir);
      const where = mount.map((m) => `${m.fsType} ${m.device}`).join(' over ') || 'no mount';
      lines.push(`host pod ${pod.name} ${volume}: ${where}; entries ${entries(dir)}`);
    }
  }
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    const mountinfo = read(`/proc/${pid}/mountinfo`);
    if (!mountinfo) continue;
    const mount = mountsOf(mountinfo).find((m) => m.mountPoint === mountPath);
    if (!mount) continue;
    const command = (read(`/proc/${pid}/cmdline`) ?? '').split('\0').join(' ').trim();
    lines.push(
      `container pid ${pid} (${command.slice(0, 60)}): ${mount.fsType} ${mount.device} root ${mount.root}; ` +
        `entries ${entries(`/proc/${pid}/root${mountPath}`)}`,
    );
  }
  return lines.join('\n') || `no Secret volume under ${podsDir} and no container mounting ${mountPath}`;
}
