/**
 * examples-repo/ runs as shipped (examples that drift from the schema fail here first). This is what
 * `npm start` does: copy it into a git repository and watch it. Dependencies are installed for real
 * (npm ci, pip install, go build).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureExamplesRepository } from '../../src/cli/examples-repo.js';
import { PACKAGE_ROOT } from '../../src/config/config.js';
import type { Trigger } from '../../src/core/resources.js';
import { tempDir } from '../helpers/git.js';
import { eventually, startTestSystem, type TestSystem } from '../helpers/local-system.js';

describe('examples-repo', () => {
  let system: TestSystem;

  beforeAll(async () => {
    const repo = await ensureExamplesRepository(
      join(PACKAGE_ROOT, 'examples-repo'),
      join(await tempDir('examples'), 'repo'),
    );
    system = await startTestSystem({ url: repo.path });
    await eventually(
      async () => {
        const fns = await system.store.list('Function');
        return (
          fns.length === 5 && fns.every((f) => f.status?.phase === 'Ready' || f.status?.phase === 'Failed')
        );
      },
      240_000,
      'examples deployed',
    );
  }, 300_000);

  afterAll(async () => {
    await system?.close();
  });

  it('deploys every example function', async () => {
    const fns = await system.store.list('Function');
    expect(Object.fromEntries(fns.map((f) => [f.metadata.name, f.status?.phase]))).toEqual({
      'hello-go': 'Ready',
      'hello-node': 'Ready',
      'hello-python': 'Ready',
      'time-node': 'Ready',
      'ticks-node': 'Ready',
    });
  });

  it('ticks-node streams server-sent events', async () => {
    const response = await system.call('/fn/default/ticks-node?count=3&everyMs=50');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const events = (await response.text()).split('\n\n').filter((e) => e !== '');
    expect(events.map((e) => e.split('\n')[0])).toEqual(['id: 1', 'id: 2', 'id: 3']);
    expect(JSON.parse(events[2]?.split('data: ')[1] ?? '')).toMatchObject({ tick: 3 });
  });

  it.each([
    ['/fn/default/hello-node?name=sless', { message: 'Hello, sless!', function: 'hello-node', path: '/' }],
    ['/fn/default/hello-go?name=sless', { message: 'Hello, sless!', function: 'hello-go', path: '/' }],
    ['/fn/default/time-node?in=2h', { duration: '2h', milliseconds: 7200000, human: '2 hours' }],
    [
      '/fn/default/hello-python?bytes=3000000',
      { message: 'Hello from Python!', function: 'hello-python', size: '3.0 MB' },
    ],
  ])('%s answers', async (path, expected) => {
    const response = await system.call(path);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(expected);
  });

  it('runs the example FunctionJob and schedules the cron trigger', async () => {
    const job = await eventually(
      async () => {
        const j = await system.store.get('FunctionJob', 'default', 'hello-once');
        return j?.status?.phase === 'Succeeded' ? j : undefined;
      },
      30_000,
      'example job',
    );
    expect(job.status?.result).toMatchObject({ statusCode: 200, body: { message: 'Hello, job!' } });
    const trigger = (await system.store.get('Trigger', 'default', 'hello-every-minute')) as
      | Trigger
      | undefined;
    expect(trigger?.status?.phase).toBe('Ready');
    expect(Date.parse(trigger?.status?.nextRun ?? '')).toBeGreaterThan(Date.now() - 1000);
  });
});
