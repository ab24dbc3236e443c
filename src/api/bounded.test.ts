/**
 * The API's in-memory state stays bounded: BuildHistory keeps the newest builds per function and forgets
 * the least recent functions, and RecentDeliveries sees a redelivery while bounding ids and sources.
 */
import { describe, expect, test } from 'vitest';
import type { BuildRecord, SlessFunction } from '../core/resources.js';
import { BuildHistory } from './build-history.js';
import { RecentDeliveries } from './webhooks/deliveries.js';

const fnNamed = (name: string) => ({ metadata: { name, namespace: 'default' } }) as SlessFunction;
const record = (n: number): BuildRecord => ({
  buildKey: `k${n}`,
  commit: 'c',
  result: 'Succeeded',
  startedAt: new Date(n * 1000).toISOString(),
});

describe('bounded in-memory state', () => {
  test('BuildHistory keeps the newest builds per function and forgets the least recent functions', () => {
    const history = new BuildHistory({ perFunction: 3, maxFunctions: 2 });
    for (let n = 1; n <= 5; n++) history.record(record(n), fnNamed('a'));
    expect(history.list('default', 'a').map((b) => b.buildKey)).toEqual(['k5', 'k4', 'k3']);
    history.record(record(1), fnNamed('b'));
    history.record(record(1), fnNamed('c'));
    expect(history.list('default', 'a')).toEqual([]);
    expect(history.list('default', 'c')).toHaveLength(1);
  });

  test('RecentDeliveries: a redelivery is seen; ids and sources are bounded', () => {
    const deliveries = new RecentDeliveries({ perSource: 2, maxSources: 2 });
    expect(deliveries.checkAndRecord('s1', 'd1')).toBe(false);
    expect(deliveries.checkAndRecord('s1', 'd1')).toBe(true);
    expect(deliveries.checkAndRecord('s2', 'd1')).toBe(false);
    deliveries.checkAndRecord('s1', 'd2');
    deliveries.checkAndRecord('s1', 'd3');
    expect(deliveries.checkAndRecord('s1', 'd1')).toBe(false);
    deliveries.checkAndRecord('s3', 'x');
    // s2 was least recently used and is gone.
    expect(deliveries.checkAndRecord('s2', 'd1')).toBe(false);
  });
});
