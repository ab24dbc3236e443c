/**
 * Model-based test of "a restart never loses what serves", with fast-check's commands API: random
 * sequences of commits (add, change, rename, delete, env-only, a refused build, invalid kinds)
 * interleaved with kill -9 / SIGTERM restarts and git-server outages, against the real `sless dev`
 * (a child process) and a repository served over smart HTTP by `git http-backend`.
 *
 * After each step: the functions answering 200 are exactly the model's, each body carries the marker
 * of the commit that the model says was accepted last, and no (function, code tree) was built twice
 * across every process of the run. Right after a restart the check runs at once, without waiting: the
 * first requests are already served as before.
 *
 * CI runs a few short sequences; SLESS_MODEL_RUNS (and SLESS_MODEL_STEPS) run more.
 */
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { GitSourceStatus } from '../../src/core/resources.js';
import { freePort } from '../../src/platform/local/ports.js';
import { functionManifest, git, nodeHandler, tempDir } from '../helpers/git.js';
import { eventually } from '../helpers/local-system.js';
import { type RemoteRepo, startRemoteRepo } from '../helpers/remote-repo.js';
import { SlessProcess } from '../helpers/sless-process.js';

const RUNS = Number(process.env.SLESS_MODEL_RUNS ?? 2);
const STEPS = Number(process.env.SLESS_MODEL_STEPS ?? 8);
const NAMES = ['fa', 'fb', 'fc'] as const;
type Name = (typeof NAMES)[number];
const INVALID = ['field', 'yaml', 'path'] as const;
type InvalidKind = (typeof INVALID)[number];

interface FnState {
  code: number;
  /** The tree holds a symlink out of the function's directory: its build is refused. */
  bad: boolean;
}
interface Tree {
  fns: Map<Name, FnState>;
  marker: number;
}
interface Served {
  code: number;
  marker: number;
}
interface Model {
  /** The repository's last valid tree (an invalid commit does not change it). */
  head: Tree;
  /** True while the head commit is an invalid one. */
  headInvalid: boolean;
  /** What sless has accepted: the last valid head it could see. */
  accepted: Tree;
  /** The commit id of `accepted`, which the GitSource reports as lastSyncedCommit. */
  acceptedCommit: string;
  /** The commit id of the head with `head`'s tree (valid commits only). */
  headCommit: string;
  served: Map<Name, Served>;
  outage: boolean;
  nextCode: number;
  nextMarker: number;
  /**
   * How often each function was removed from an accepted commit: a deleted Function's builds go with
   * it (build GC), so the same tree added again under that name may be built once more per removal.
   */
  removals: Map<Name, number>;
}

interface Real {
  repo: RemoteRepo;
  stateDir: string;
  port: number;
  sless: SlessProcess;
  /** Every process of the run, for counting builds across restarts. */
  processes: SlessProcess[];
}

function cloneTree(tree: Tree): Tree {
  return { fns: new Map([...tree.fns].map(([n, s]) => [n, { ...s }])), marker: tree.marker };
}

/** What sless serves once it accepts `tree`: a refused build leaves that function's previous revision. */
function accept(model: Model, tree: Tree, commit: string): void {
  const served = new Map<Name, Served>();
  for (const [name, fn] of tree.fns) {
    if (!fn.bad) served.set(name, { code: fn.code, marker: tree.marker });
    else {
      const previous = model.served.get(name);
      if (previous) served.set(name, previous);
    }
  }
  for (const name of model.accepted.fns.keys())
    if (!tree.fns.has(name)) model.removals.set(name, (model.removals.get(name) ?? 0) + 1);
  model.accepted = cloneTree(tree);
  model.acceptedCommit = commit;
  model.served = served;
}

function filesOf(tree: Tree, invalid?: InvalidKind): Record<string, string | null> {
  const files: Record<string, string | null> = { zz: null };
  for (const name of NAMES) {
    const fn = tree.fns.get(name);
    if (!fn) {
      files[name] = null;
      continue;
    }
    files[`${name}/function.yaml`] = functionManifest(name, { env: { MARKER: String(tree.marker) } });
    files[`${name}/handler.js`] = nodeHandler(
      `return { fn: '${name}', code: ${fn.code}, marker: process.env.MARKER };`,
    );
    if (!fn.bad) files[`${name}/passwd`] = null;
  }
  if (invalid === 'field') files['zz/function.yaml'] = functionManifest('zz', { memoryMb: 999999 });
  if (invalid === 'path') files['zz/function.yaml'] = functionManifest('zz', { source: { path: '../..' } });
  if (invalid === 'yaml')
    files['zz/function.yaml'] = 'apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata: { name: zz\n';
  return files;
}

async function pushTree(real: Real, tree: Tree, invalid?: InvalidKind): Promise<string> {
  for (const [name, fn] of tree.fns) {
    if (!fn.bad) continue;
    const dir = join(real.repo.work.dir, name);
    await mkdir(dir, { recursive: true });
    await symlink('../../../../../../etc/passwd', join(dir, 'passwd')).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EEXIST') throw error;
      },
    );
  }
  return real.repo.push(filesOf(tree, invalid), invalid ? `invalid (${invalid})` : `marker ${tree.marker}`);
}

async function sourceStatus(real: Real): Promise<GitSourceStatus | undefined> {
  const response = await real.sless.call('/v1/namespaces/default/sources/examples');
  return ((await response.json()) as { status?: GitSourceStatus }).status;
}

/** The functions answering 200 and their bodies, compared with the model's. */
async function servedNow(real: Real): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const name of NAMES) {
    const response = await real.sless.call(`/fn/default/${name}`);
    if (response.status === 200) out[name] = await response.json();
    else await response.body?.cancel();
  }
  return out;
}

function expected(model: Model): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, s] of [...model.served].sort(([a], [b]) => a.localeCompare(b)))
    out[name] = { fn: name, code: s.code, marker: String(s.marker) };
  return out;
}

/**
 * No (function, build key) was built (successfully or not) more than once over the whole run, save
 * once more for each time the function was deleted (its builds went with it).
 */
function assertNoTreeBuiltTwice(model: Model, real: Real): void {
  const counts = new Map<string, { name: Name; builds: number }>();
  for (const p of real.processes)
    for (const line of [...p.lines('build succeeded'), ...p.lines('build failed')]) {
      const key = `${line.function}@${line.buildKey}`;
      const name = String(line.function).split('/')[1] as Name;
      counts.set(key, { name, builds: (counts.get(key)?.builds ?? 0) + 1 });
    }
  const twice = [...counts]
    .filter(([, { name, builds }]) => builds > 1 + (model.removals.get(name) ?? 0))
    .map(([key, { builds }]) => [key, builds]);
  expect(twice, 'code trees built more than once').toEqual([]);
}

async function converge(model: Model, real: Real): Promise<void> {
  const want = expected(model);
  let last: Record<string, unknown> = {};
  try {
    await eventually(
      async () => {
        last = await servedNow(real);
        return JSON.stringify(last) === JSON.stringify(want);
      },
      60_000,
      'served set equals the model',
    );
  } catch {
    expect(last, 'served set').toEqual(want);
  }
  expect(real.sless.alive).toBe(true);
  expect((await sourceStatus(real))?.lastSyncedCommit, 'the last accepted commit').toBe(model.acceptedCommit);
  assertNoTreeBuiltTwice(model, real);
}

/** A commit of a new valid tree; when sless can see it, waits until it was synced. */
async function commitValid(model: Model, real: Real, change: (tree: Tree) => void): Promise<void> {
  const tree = cloneTree(model.head);
  change(tree);
  tree.marker = model.nextMarker++;
  const commit = await pushTree(real, tree);
  model.head = tree;
  model.headCommit = commit;
  model.headInvalid = false;
  if (!model.outage) {
    accept(model, tree, commit);
    await eventually(
      async () => (await sourceStatus(real))?.lastSyncedCommit === commit,
      60_000,
      'commit synced',
    );
  }
  await converge(model, real);
}

abstract class Step implements fc.AsyncCommand<Model, Real> {
  check(_model: Readonly<Model>): boolean {
    return true;
  }
  abstract run(model: Model, real: Real): Promise<void>;
  abstract toString(): string;
}

class AddFunction extends Step {
  constructor(readonly name: Name) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return !m.head.fns.has(this.name);
  }
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, (t) => {
      t.fns.set(this.name, { code: m.nextCode++, bad: false });
    });
  }
  toString(): string {
    return `add ${this.name}`;
  }
}

class ChangeCode extends Step {
  constructor(readonly name: Name) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.head.fns.has(this.name);
  }
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, (t) => {
      t.fns.set(this.name, { code: m.nextCode++, bad: false });
    });
  }
  toString(): string {
    return `change ${this.name}`;
  }
}

class RenameFunction extends Step {
  constructor(
    readonly from: Name,
    readonly to: Name,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.head.fns.has(this.from) && !m.head.fns.has(this.to);
  }
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, (t) => {
      const state = t.fns.get(this.from) as FnState;
      t.fns.delete(this.from);
      t.fns.set(this.to, state);
    });
  }
  toString(): string {
    return `rename ${this.from} → ${this.to}`;
  }
}

class DeleteFunction extends Step {
  constructor(readonly name: Name) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.head.fns.has(this.name);
  }
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, (t) => t.fns.delete(this.name));
  }
  toString(): string {
    return `delete ${this.name}`;
  }
}

class EnvOnly extends Step {
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, () => undefined);
  }
  toString(): string {
    return 'env-only';
  }
}

class RefusedBuild extends Step {
  constructor(readonly name: Name) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.head.fns.get(this.name)?.bad === false;
  }
  run(m: Model, r: Real): Promise<void> {
    return commitValid(m, r, (t) => {
      t.fns.set(this.name, { code: m.nextCode++, bad: true });
    });
  }
  toString(): string {
    return `symlink out in ${this.name}`;
  }
}

class InvalidCommit extends Step {
  constructor(readonly kind: InvalidKind) {
    super();
  }
  async run(m: Model, r: Real): Promise<void> {
    const commit = await pushTree(r, m.head, this.kind);
    m.headInvalid = true;
    if (!m.outage)
      await eventually(
        async () => (await sourceStatus(r))?.lastAttemptedCommit === commit,
        60_000,
        'invalid commit rejected',
      );
    await converge(m, r);
  }
  toString(): string {
    return `invalid commit (${this.kind})`;
  }
}

class Restart extends Step {
  constructor(readonly signal: 'SIGKILL' | 'SIGTERM') {
    super();
  }
  async run(m: Model, r: Real): Promise<void> {
    const [code] = await r.sless.stop(this.signal);
    if (this.signal === 'SIGTERM') expect(code, 'exit code after SIGTERM').toBe(0);
    r.sless = await SlessProcess.start({ repo: r.repo.url, stateDir: r.stateDir, port: r.port });
    r.processes.push(r.sless);
    // At once: what served before the restart serves from the first request.
    expect(await servedNow(r), 'served right after the restart').toEqual(expected(m));
    await converge(m, r);
  }
  toString(): string {
    return `restart (${this.signal})`;
  }
}

class Outage extends Step {
  async run(m: Model, r: Real): Promise<void> {
    m.outage = !m.outage;
    r.repo.server.setAvailable(!m.outage);
    if (!m.outage && !m.headInvalid) accept(m, m.head, m.headCommit);
    await converge(m, r);
  }
  toString(): string {
    return 'toggle git-server outage';
  }
}

const name = fc.constantFrom(...NAMES);
const steps = [
  name.map((n) => new AddFunction(n)),
  name.map((n) => new AddFunction(n)),
  name.map((n) => new ChangeCode(n)),
  fc.tuple(name, name).map(([a, b]) => new RenameFunction(a, b)),
  name.map((n) => new DeleteFunction(n)),
  fc.constant(new EnvOnly()),
  name.map((n) => new RefusedBuild(n)),
  fc.constantFrom(...INVALID).map((k) => new InvalidCommit(k)),
  fc.constantFrom('SIGKILL' as const, 'SIGTERM' as const).map((s) => new Restart(s)),
  fc.constantFrom('SIGKILL' as const, 'SIGTERM' as const).map((s) => new Restart(s)),
  fc.constant(new Outage()),
];

describe('restarts against a model (fast-check commands)', () => {
  it(
    'after every commit, restart and outage the served functions equal the last accepted commit',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.commands(steps, { maxCommands: STEPS }), async (commands) => {
          const initial: Tree = { fns: new Map([['fa', { code: 1, bad: false }]]), marker: 1 };
          const repo = await startRemoteRepo(filesOf(initial) as Record<string, string>);
          const first = await git(repo.work.dir, 'rev-parse', 'HEAD');
          const stateDir = await tempDir('model-state');
          const port = await freePort();
          const sless = await SlessProcess.start({ repo: repo.url, stateDir, port });
          const real: Real = { repo, stateDir, port, sless, processes: [sless] };
          const model: Model = {
            head: cloneTree(initial),
            headInvalid: false,
            accepted: cloneTree(initial),
            acceptedCommit: first,
            headCommit: first,
            served: new Map(),
            outage: false,
            nextCode: 2,
            nextMarker: 2,
            removals: new Map(),
          };
          accept(model, initial, first);
          try {
            await converge(model, real);
            await fc.asyncModelRun(() => ({ model, real }), commands);
            if (process.env.SLESS_MODEL_VERBOSE) console.log(`ran: ${String(commands)}`);
            // Every sequence ends with a restart, so each run checks at least one.
            await new Restart('SIGKILL').run(model, real);
          } finally {
            await real.sless.stop('SIGKILL');
            await repo.close();
          }
        }),
        { numRuns: RUNS, endOnFailure: true },
      );
    },
    30 * 60_000,
  );
});
