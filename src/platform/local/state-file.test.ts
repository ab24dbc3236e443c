/**
 * The local platform's state on disk, in real temporary directories: StateFile writes {version, data},
 * coalesces saves, removes what a killed write left, and sets an unreadable or foreign-version file aside
 * with a warning, never throwing; its journal appends changes, replays them in order, rewrites the
 * document when it grows, and copes with lines a kill left covered or cut short; LocalState brings back
 * the store, serving records and failed builds after a restart.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { SlessFunction } from '../../core/resources.js';
import { LocalState } from './local-state.js';
import { MemoryStore, type StoreSnapshot } from './memory-store.js';
import { expectRecord, StateFile } from './state-file.js';

/** Every directory a test made, removed once the file's tests end. */
const madeDirs: string[] = [];
async function madeDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  madeDirs.push(dir);
  return dir;
}
afterAll(() => Promise.all(madeDirs.map((dir) => rm(dir, { recursive: true, force: true }))));

interface Counter {
  count: number;
}

function decodeCounter(payload: unknown): Counter {
  const data = expectRecord(payload, 'data');
  if (typeof data.count !== 'number') throw new Error('data.count must be a number');
  return { count: data.count };
}

async function setUp() {
  const dir = await madeDir('sless-state-file-');
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line).msg) });
  const path = join(dir, 'counter.json');
  const file = new StateFile<Counter>({ path, version: 3, logger, decode: decodeCounter });
  return { dir, path, file, warnings };
}

describe('StateFile', () => {
  it('writes {version, data} and reads it back', async () => {
    const { path, file } = await setUp();
    expect(await file.load()).toBeUndefined();
    await file.save(() => ({ count: 7 }));
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({ version: 3, data: { count: 7 } });
    expect(await file.load()).toEqual({ count: 7 });
  });

  it('writes a save asked for the moment the previous one resolved', async () => {
    const { path, file } = await setUp();
    // The caller resumes while the finished write is still winding down; this save must not join it.
    await file.save(() => ({ count: 1 }));
    await file.save(() => ({ count: 2 }));
    expect(JSON.parse(await readFile(path, 'utf8')).data).toEqual({ count: 2 });
  });

  it('coalesces: saves asked for during a write share the next one, which has the latest state', async () => {
    const { path, file, dir } = await setUp();
    let state = 0;
    let serialised = 0;
    const snapshot = () => {
      serialised++;
      return { count: state };
    };
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 50; i++) {
      state = i;
      saves.push(file.save(snapshot));
    }
    await Promise.all(saves);
    // The first write started at once; the 49 asked for meanwhile were served by one more write.
    expect(serialised).toBe(2);
    expect(JSON.parse(await readFile(path, 'utf8')).data).toEqual({ count: 50 });
    expect((await readdir(dir)).sort()).toEqual(['counter.json']);
  });

  it.each([
    ['not JSON', '{"version": 3, "data": {"cou', 'is not JSON: '],
    ['without a version', '{"data": {"count": 1}}', 'has no integer "version" field'],
    [
      'from a newer sless',
      '{"version": 4, "data": {"count": 1}}',
      'has version 4, written by a newer sless (this one reads version 3)',
    ],
    [
      'from an older format',
      '{"version": 2, "data": {"count": 1}}',
      'has version 2, which this sless no longer reads (it reads version 3)',
    ],
    [
      'of the wrong shape',
      '{"version": 3, "data": {"count": "x"}}',
      'has an unexpected shape: data.count must be a number',
    ],
  ])('sets a file %s aside with a warning, never throwing', async (_what, content, reason) => {
    const { dir, path, file, warnings } = await setUp();
    await writeFile(path, content);
    expect(await file.load()).toBeUndefined();
    const entries = await readdir(dir);
    const aside = entries.filter((e) => e.startsWith('counter.json.set-aside-'));
    expect(aside).toHaveLength(1);
    expect(entries).not.toContain('counter.json');
    expect(await readFile(join(dir, aside[0] as string), 'utf8')).toBe(content);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`state file ${path} ${reason}`);
    expect(warnings[0]).toMatch(/moved it aside and started without it$/);
    // The next save writes a fresh file in its place.
    await file.save(() => ({ count: 1 }));
    expect(await file.load()).toEqual({ count: 1 });
  });

  it('finishes the writes asked for when closed, and writes nothing after', async () => {
    const { path, file } = await setUp();
    const saved = file.save(() => ({ count: 1 }));
    await file.close();
    await saved;
    expect(await file.load()).toEqual({ count: 1 });
    await file.save(() => ({ count: 2 }));
    expect(JSON.parse(await readFile(path, 'utf8')).data).toEqual({ count: 1 });
  });

  it('removes temporary files a killed write left behind', async () => {
    const { dir, path, file } = await setUp();
    await writeFile(`${path}.tmp-12345`, '{"version": 3, "da');
    await file.save(() => ({ count: 2 }));
    expect(await file.load()).toEqual({ count: 2 });
    expect(await readdir(dir)).toEqual(['counter.json']);
  });
});

interface Added {
  items: number[];
}

function decodeAdded(payload: unknown): Added {
  const data = expectRecord(payload, 'data');
  if (!Array.isArray(data.items)) throw new Error('data.items must be an array');
  return { items: data.items as number[] };
}

/** Each change appends one number, so a replay in the wrong order or with a line too many shows. */
function replayAdded(payload: unknown, changes: unknown[]): unknown {
  const items = [...decodeAdded(payload).items];
  for (const change of changes) {
    const add = (change as { add?: unknown }).add;
    if (typeof add !== 'number') throw new Error('a change must be {"add": n}');
    items.push(add);
  }
  return { items };
}

async function setUpJournaled() {
  const dir = await madeDir('sless-state-journal-');
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line).msg) });
  const path = join(dir, 'added.json');
  const open = () =>
    new StateFile<Added>({
      path,
      version: 1,
      logger,
      decode: decodeAdded,
      replay: replayAdded,
      minJournalBytes: 1024,
    });
  const state: Added = { items: [] };
  const file = open();
  const add = (target: StateFile<Added>, n: number) => {
    state.items.push(n);
    return target.save(() => ({ items: [...state.items] }), JSON.stringify({ add: n }));
  };
  return { dir, path, journal: `${path}.journal`, open, file, add, state, warnings };
}

describe('StateFile with a journal', () => {
  it('appends each change as a line after the first write, and a load replays them in order', async () => {
    const { path, journal, open, file, add } = await setUpJournaled();
    expect(await file.load()).toBeUndefined();
    await add(file, 1);
    const document = await readFile(path, 'utf8');
    expect(JSON.parse(document)).toEqual({ version: 1, journaled: 0, data: { items: [1] } });
    await add(file, 2);
    await add(file, 3);
    // The document is not written again; the journal has one line per change.
    expect(await readFile(path, 'utf8')).toBe(document);
    expect(await readFile(journal, 'utf8')).toBe(
      '{"seq":1,"change":{"add":2}}\n{"seq":2,"change":{"add":3}}\n',
    );
    expect(await open().load()).toEqual({ items: [1, 2, 3] });
  });

  it('writes the whole document again once the journal is as large as it, and removes the journal', async () => {
    const { path, journal, open, file, add, state } = await setUpJournaled();
    await file.load();
    await add(file, 0);
    // A line is 29–31 bytes here: the journal passes 1 KiB (the document is smaller) with the 34th
    // change, and the 35th writes the document again.
    for (let n = 1; n <= 40; n++) await add(file, n);
    const document = JSON.parse(await readFile(path, 'utf8')) as { journaled: number; data: Added };
    expect(document.journaled).toBe(34);
    // The rewrite also holds the change that asked for it, which takes no sequence number.
    expect(document.data.items).toEqual(Array.from({ length: 36 }, (_, n) => n));
    const lines = (await readFile(journal, 'utf8')).split('\n').filter(Boolean);
    expect(lines.map((line) => JSON.parse(line).seq)).toEqual([35, 36, 37, 38, 39]);
    expect(JSON.parse(lines[0] ?? '').seq).toBe(document.journaled + 1);
    expect(await open().load()).toEqual(state);
  });

  it('skips lines the document already covers (a kill between writing it and removing the journal)', async () => {
    const { path, journal, open, warnings } = await setUpJournaled();
    await writeFile(path, '{"version":1,"journaled":2,"data":{"items":[1,2,3]}}\n');
    await writeFile(
      journal,
      '{"seq":1,"change":{"add":2}}\n{"seq":2,"change":{"add":3}}\n{"seq":3,"change":{"add":4}}\n',
    );
    const file = open();
    expect(await file.load()).toEqual({ items: [1, 2, 3, 4] });
    expect(warnings).toEqual([]);
    // The next write is the whole document; sequence numbers go on from the journal's last.
    await file.save(() => ({ items: [1, 2, 3, 4, 5] }), '{"add":5}');
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({
      version: 1,
      journaled: 3,
      data: { items: [1, 2, 3, 4, 5] },
    });
    expect(await readdir(dirname(path))).toEqual(['added.json']);
    await file.save(() => ({ items: [1, 2, 3, 4, 5, 6] }), '{"add":6}');
    expect(await readFile(journal, 'utf8')).toBe('{"seq":4,"change":{"add":6}}\n');
  });

  it('drops a last line cut short by a kill, and replaces the journal on the next write', async () => {
    const { path, journal, open, warnings } = await setUpJournaled();
    await writeFile(path, '{"version":1,"journaled":0,"data":{"items":[1]}}\n');
    await writeFile(journal, '{"seq":1,"change":{"add":2}}\n{"seq":2,"change":{"ad');
    const file = open();
    expect(await file.load()).toEqual({ items: [1, 2] });
    expect(warnings).toEqual([]);
    await file.save(() => ({ items: [1, 2, 7] }), '{"add":7}');
    expect(await readdir(dirname(path))).toEqual(['added.json']);
    expect(await open().load()).toEqual({ items: [1, 2, 7] });
  });

  it.each([
    ['GARBAGE', 'is not JSON'],
    ['null', 'has no "seq" or "change"'],
    ['{"seq":2}', 'has no "seq" or "change"'],
  ])(
    'sets a journal damaged by a line %s aside from there, keeping the changes before it and the document',
    async (damage, reason) => {
      const { dir, path, journal, open, warnings } = await setUpJournaled();
      await writeFile(path, '{"version":1,"journaled":0,"data":{"items":[1]}}\n');
      await writeFile(journal, `{"seq":1,"change":{"add":2}}\n${damage}\n{"seq":3,"change":{"add":4}}\n`);
      expect(await open().load()).toEqual({ items: [1, 2] });
      expect(warnings).toEqual([
        `state journal ${journal} line 2 ${reason}; the 1 lines before it are applied; moved it aside`,
      ]);
      const entries = await readdir(dir);
      expect(entries.filter((e) => e.startsWith('added.json.journal.set-aside-'))).toHaveLength(1);
      expect(entries.filter((e) => e.startsWith('added.json.set-aside-'))).toEqual([]);
    },
  );

  it('sets aside a journal whose changes the document does not take, and keeps the document', async () => {
    const { dir, path, journal, open, warnings } = await setUpJournaled();
    await writeFile(path, '{"version":1,"journaled":0,"data":{"items":[1]}}\n');
    await writeFile(journal, '{"seq":1,"change":{"add":2}}\n{"seq":2,"change":{"remove":2}}\n');
    expect(await open().load()).toEqual({ items: [1] });
    expect(warnings).toEqual([
      `state journal ${journal} does not apply to its document (a change must be {"add": n}); the document is used without it; moved it aside`,
    ]);
    const entries = await readdir(dir);
    expect(entries.filter((e) => e.startsWith('added.json.journal.set-aside-'))).toHaveLength(1);
    expect(entries.filter((e) => e.startsWith('added.json.set-aside-'))).toEqual([]);
  });

  it('sets the journal aside with its document when the document cannot be used', async () => {
    const { dir, path, journal, open, warnings } = await setUpJournaled();
    await writeFile(path, '{"version":1,"journaled":0,"data":{"items":"none"}}\n');
    await writeFile(journal, '{"seq":1,"change":{"add":2}}\n');
    expect(await open().load()).toBeUndefined();
    expect(warnings).toEqual([
      `state journal ${journal} does not apply to its document (data.items must be an array); the document is used without it; moved it aside`,
      `state file ${path} has an unexpected shape: data.items must be an array; moved it aside and started without it`,
    ]);
    const entries = await readdir(dir);
    expect(entries.filter((e) => e.startsWith('added.json.set-aside-'))).toHaveLength(1);
    expect(entries.filter((e) => e.startsWith('added.json.journal.set-aside-'))).toHaveLength(1);
  });
});

describe('LocalState', () => {
  const fn = (name: string): SlessFunction => ({
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: { name, namespace: 'default' },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128, timeoutSec: 30, replicas: 1 },
  });

  const build = {
    buildKey: 'k1',
    commit: 'c1',
    result: 'Succeeded' as const,
    startedAt: 't',
    image: '/b/k1',
  };

  it('brings back the store (with status), the serving records and failed verdicts', async () => {
    const dir = await madeDir('sless-local-state-');
    const logger = pino({ level: 'silent' });
    const state = await LocalState.open(dir, logger);
    const store: MemoryStore = new MemoryStore({ persist: () => state.saveStore(() => store.snapshot()) });
    const applied = await store.apply(fn('a'));
    await store.patchStatus(applied, { phase: 'Ready' });
    await store.ensureNamespace('team');
    await state.serving.record({ fn: fn('a'), build, revision: 'k1-cfg', enabled: true });
    await state.failedBuilds.set(fn('a'), 'k2', {
      ...build,
      buildKey: 'k2',
      result: 'Failed',
      message: 'no',
    });

    const again = await LocalState.open(dir, logger);
    const restored = new MemoryStore(again.storeSnapshot ? { initial: again.storeSnapshot } : {});
    expect(await restored.get('Function', 'default', 'a')).toEqual(
      await store.get('Function', 'default', 'a'),
    );
    expect((await restored.get('Function', 'default', 'a'))?.status).toEqual({ phase: 'Ready' });
    expect(await restored.namespaceExists('team')).toBe(true);
    // Resource versions go on from where they were, never back.
    const next = await restored.apply({ ...fn('b') });
    expect(Number(next.metadata.resourceVersion)).toBeGreaterThan(
      Number(applied.metadata.resourceVersion) + 1,
    );
    expect(again.serving.get('default/a')).toEqual({ fn: fn('a'), build, revision: 'k1-cfg', enabled: true });
    expect([...again.serving.pinnedBuildDirs()]).toEqual(['/b/k1']);
    expect(again.failedBuilds.get(fn('a'), 'k2')?.message).toBe('no');
    expect(again.failedBuilds.get(fn('a'), 'k1')).toBeUndefined();
    await again.failedBuilds.delete(fn('a'), 'k2');
    await again.serving.forget('default/a');
    const third = await LocalState.open(dir, logger);
    expect(third.failedBuilds.get(fn('a'), 'k2')).toBeUndefined();
    expect(third.serving.all()).toEqual([]);
  });

  it('writes each change of the store and of the serving records, reusing the JSON of the rest', async () => {
    const dir = await madeDir('sless-local-state-');
    const logger = pino({ level: 'silent' });
    const state = await LocalState.open(dir, logger);
    const store: MemoryStore = new MemoryStore({
      persist: (change) => state.saveStore(() => store.snapshotJson(), change),
    });
    const stored = async () => (await LocalState.open(dir, logger)).storeSnapshot;
    const a = await store.apply(fn('a'));
    await store.apply(fn('b'));
    await state.serving.record({ fn: fn('a'), build, revision: 'r1', enabled: true });
    await state.serving.record({ fn: fn('b'), build, revision: 'r1', enabled: true });
    expect((await stored())?.objects.map((o) => o.metadata.name)).toEqual(['a', 'b']);
    // Each later change must reach the file although the other objects' JSON is reused.
    await store.patchStatus(a, { phase: 'Ready' });
    expect(await stored()).toEqual(store.snapshot());
    await store.apply({ ...fn('a'), spec: { ...fn('a').spec, memoryMb: 256 } });
    expect((await stored())?.objects[0]?.spec).toMatchObject({ memoryMb: 256 });
    expect((await stored())?.objects[0]?.status).toEqual({ phase: 'Ready' });
    await store.delete('Function', 'default', 'b');
    expect(await stored()).toEqual(store.snapshot());
    await store.ensureNamespace('team');
    expect((await stored())?.namespaces).toEqual(['default', 'team']);
    await state.serving.record({ fn: fn('a'), build, revision: 'r2', enabled: true });
    await state.serving.forget('default/b');
    const serving = (await LocalState.open(dir, logger)).serving;
    expect(serving.all().map(([key, record]) => [key, record.revision])).toEqual([['default/a', 'r2']]);
    // After the first write of each file, changes went to their journals.
    const files = (await readdir(join(dir, 'state'))).sort();
    expect(files).toEqual(['objects.json', 'objects.json.journal', 'serving.json', 'serving.json.journal']);
    const restored = new MemoryStore({ initial: (await stored()) as StoreSnapshot });
    expect(restored.snapshot()).toEqual(store.snapshot());
  });

  it('lets no reader see a change before it is on disk', async () => {
    let finishWrite: () => void = () => undefined;
    let writes = 0;
    const store = new MemoryStore({
      persist: () => {
        writes++;
        return new Promise<void>((resolve) => {
          finishWrite = resolve;
        });
      },
    });
    const applying = store.apply(fn('a'));
    let seen: unknown = 'not yet';
    const reading = store.get('Function', 'default', 'a').then((found) => {
      seen = found?.metadata.name;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(writes).toBe(1);
    expect(seen).toBe('not yet');
    finishWrite();
    await Promise.all([applying, reading]);
    expect(seen).toBe('a');
  });
});
