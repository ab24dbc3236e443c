/**
 * Memory and process-count limits for tenant processes through cgroups (v1, or v2 where delegated):
 * finding the controllers this machine lets sless use, making a group per process, and removing the
 * groups a killed sless left behind.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { leftBehind } from '../core/left-behind.js';

/** A controller sless can create child groups in: the directory of sless's own group in it. */
interface Controller {
  name: 'memory' | 'pids';
  /** sless's own group; per-process groups go below `{base}/sless-{pid}/`. */
  base: string;
  version: 1 | 2;
}

export interface CgroupLimitsOptions {
  /** Mount point of the cgroup file systems (tests may point elsewhere). */
  root?: string;
  /** /proc/self/cgroup's contents. */
  selfCgroup?: string;
}

/** The groups one process joins, and how to remove them once it is gone. */
export interface ProcessGroups {
  /** `cgroup.procs` files the launcher writes the process's pid into before it runs tenant code. */
  procsFiles: string[];
  release(): void;
}

const STALE = /^sless-(\d+)$/;

function removeGroup(dir: string): void {
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true }))
      if (entry.isDirectory()) removeGroup(join(dir, entry.name));
    rmdirSync(dir);
  } catch {
    // Still has processes (they will be gone soon) or already removed.
  }
}

/**
 * Memory and process-count limits through cgroups: v1 controllers (memory, pids), or v2 when sless's
 * own group delegates them. Groups live below sless's own group, in `sless-{pid}`, so a later start
 * finds and removes what a killed one left behind.
 */
export class CgroupLimits {
  private readonly controllers: Controller[];
  /** Why a controller is missing, for the start-up report. */
  readonly missing: Map<'memory' | 'pids', string> = new Map();
  private counter = 0;
  /** Several sless instances may share one process (tests): each names its groups apart. */
  private readonly tag = randomBytes(4).toString('hex');
  private readonly live = new Set<string>();

  constructor(options: CgroupLimitsOptions = {}) {
    const root = options.root ?? '/sys/fs/cgroup';
    let selfCgroup = options.selfCgroup;
    if (selfCgroup === undefined) {
      try {
        selfCgroup = readFileSync('/proc/self/cgroup', 'utf8');
      } catch {
        selfCgroup = '';
      }
    }
    this.controllers = [];
    const lines = selfCgroup
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [, list = '', path = '/'] = line.split(':');
        return { list: list.split(','), path };
      });
    for (const name of ['memory', 'pids'] as const) {
      const controller = this.find(root, name, lines);
      if (typeof controller === 'string') this.missing.set(name, controller);
      else this.controllers.push(controller);
    }
  }

  private find(
    root: string,
    name: 'memory' | 'pids',
    lines: { list: string[]; path: string }[],
  ): Controller | string {
    const v1 = lines.find((line) => line.list.includes(name));
    if (v1) {
      const base = join(root, name, v1.path);
      return this.writable(base) ? { name, base, version: 1 } : `cgroup v1 ${base} is not writable`;
    }
    const v2 = lines.find((line) => line.list.length === 1 && line.list[0] === '');
    if (v2) {
      // The unified mount is /sys/fs/cgroup on pure v2, /sys/fs/cgroup/unified on hybrid machines.
      const mount = existsSync(join(root, 'cgroup.controllers')) ? root : join(root, 'unified');
      const base = join(mount, v2.path);
      let delegated = '';
      try {
        delegated = readFileSync(join(base, 'cgroup.subtree_control'), 'utf8');
      } catch {
        return `no ${name} controller (no cgroup v1 hierarchy, and no cgroup v2 at ${base})`;
      }
      if (!delegated.split(/\s+/).includes(name))
        return `the cgroup v2 group ${base} does not delegate the ${name} controller to its children`;
      return this.writable(base) ? { name, base, version: 2 } : `cgroup v2 ${base} is not writable`;
    }
    return `no ${name} controller in /proc/self/cgroup`;
  }

  private writable(base: string): boolean {
    const probe = join(base, `sless-${process.pid}`);
    try {
      mkdirSync(probe, { recursive: true });
      return existsSync(join(probe, 'cgroup.procs'));
    } catch {
      return false;
    }
  }

  has(name: 'memory' | 'pids'): boolean {
    return this.controllers.some((controller) => controller.name === name);
  }

  describe(name: 'memory' | 'pids'): string {
    const controller = this.controllers.find((c) => c.name === name);
    if (!controller) return '';
    const file =
      name === 'memory' ? (controller.version === 1 ? 'memory.limit_in_bytes' : 'memory.max') : 'pids.max';
    return `cgroup v${controller.version} ${file} (${controller.base})`;
  }

  /** Removes the groups of sless processes that are gone (a kill -9 leaves them behind). */
  sweepStale(): void {
    for (const controller of this.controllers) {
      let entries: string[] = [];
      try {
        entries = readdirSync(controller.base);
      } catch {
        continue;
      }
      for (const entry of entries) if (leftBehind(entry, STALE)) removeGroup(join(controller.base, entry));
    }
  }

  /** Creates the groups for one process with these limits; undefined limits are not set. */
  create(limits: { memoryMb?: number; maxProcesses?: number }): ProcessGroups {
    const id = `${this.tag}-${++this.counter}`;
    const dirs: string[] = [];
    for (const controller of this.controllers) {
      const value =
        controller.name === 'memory'
          ? limits.memoryMb === undefined
            ? undefined
            : String(limits.memoryMb * 1024 * 1024)
          : limits.maxProcesses === undefined
            ? undefined
            : String(limits.maxProcesses);
      if (value === undefined) continue;
      const dir = join(controller.base, `sless-${process.pid}`, id);
      mkdirSync(dir, { recursive: true });
      dirs.push(dir);
      this.live.add(dir);
      if (controller.name === 'pids') writeFileSync(join(dir, 'pids.max'), value);
      else if (controller.version === 2) {
        writeFileSync(join(dir, 'memory.max'), value);
        if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
      } else {
        writeFileSync(join(dir, 'memory.limit_in_bytes'), value);
        // With swap accounting, memory+swap gets the same limit, so the limit cannot be dodged by swapping.
        if (existsSync(join(dir, 'memory.memsw.limit_in_bytes')))
          writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), value);
      }
    }
    return {
      procsFiles: dirs.map((dir) => join(dir, 'cgroup.procs')),
      release: () => {
        for (const dir of dirs) {
          removeGroup(dir);
          // Still busy: releaseAll retries it at shutdown.
          if (!existsSync(dir)) this.live.delete(dir);
        }
      },
    };
  }

  /**
   * Removes this instance's groups, and the parent once no other instance in this process uses it. A
   * group empties a moment after its process exits (the pid namespace's other tasks die after it), so
   * this retries for up to two seconds.
   */
  async releaseAll(): Promise<void> {
    for (let attempt = 0; attempt < 100 && this.live.size > 0; attempt++) {
      for (const dir of this.live) {
        removeGroup(dir);
        if (!existsSync(dir)) this.live.delete(dir);
      }
      if (this.live.size > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const controller of this.controllers) {
      try {
        rmdirSync(join(controller.base, `sless-${process.pid}`));
      } catch {
        // Another instance in this process still has groups there.
      }
    }
  }
}
