import { describe, expect, test } from 'vitest';
import type { BuildRecord, GitSource, SlessFunction } from '../core/resources.js';
import { SlessMetrics } from './metrics.js';

const source = { metadata: { name: 'repo', namespace: 'default' } } as GitSource;
const fn = { metadata: { name: 'hello', namespace: 'default' } } as SlessFunction;
const build = (result: BuildRecord['result'], durationMs: number): BuildRecord => ({
  buildKey: 'k',
  commit: 'c',
  result,
  startedAt: '2026-01-01T00:00:00Z',
  durationMs,
});

describe('SlessMetrics', () => {
  test('syncs, builds, ready functions and proxy requests, each in its own registry', async () => {
    const metrics = new SlessMetrics({
      readyFunctions: async () => new Map([['default', 2]]),
      isKnownFunction: (_ns, name) => name === 'hello',
    });
    const other = new SlessMetrics();
    metrics.syncFinished(source, { outcome: 'synced' }, 120);
    metrics.syncFinished(source, { outcome: 'failed' }, 30);
    metrics.buildStarted(fn);
    metrics.buildFinished(build('Succeeded', 2500));
    metrics.buildFinished(build('Failed', 1000));
    metrics.proxyResponse('default', 'hello', 200, 12);
    metrics.proxyResponse('default', 'random-scan-1', 404, 1);
    metrics.proxyResponse('default', 'random-scan-2', 404, 1);

    const text = await metrics.render();
    expect(text).toContain('sless_source_syncs_total{namespace="default",source="repo",result="synced"} 1');
    expect(text).toContain('sless_source_syncs_total{namespace="default",source="repo",result="failed"} 1');
    expect(text).toContain(
      'sless_source_sync_duration_seconds_count{namespace="default",source="repo",result="synced"} 1',
    );
    expect(text).toContain('sless_builds_started_total 1');
    expect(text).toContain('sless_builds_total{result="succeeded"} 1');
    expect(text).toContain('sless_builds_total{result="failed"} 1');
    expect(text).toContain('sless_build_duration_seconds_sum{result="succeeded"} 2.5');
    expect(text).toContain('sless_functions_ready{namespace="default"} 2');
    expect(text).toContain('sless_proxy_requests_total{namespace="default",function="hello",code="200"} 1');
    // Unknown names collapse into one series, so scanning cannot grow cardinality.
    expect(text).toContain(
      'sless_proxy_requests_total{namespace="_unknown",function="_unknown",code="404"} 2',
    );
    expect(text).not.toContain('random-scan');
    expect(text).toContain(
      'sless_proxy_request_duration_seconds_bucket{le="0.025",namespace="default",function="hello"} 1',
    );

    // A second instance shares nothing.
    expect(await other.render()).not.toContain('result="synced"');
  });
});
