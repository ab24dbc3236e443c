/**
 * SlessMetrics' Prometheus text: sync, build, ready-function and proxy series, each instance with its
 * own registry; unknown function names collapse into one series so scans cannot grow cardinality; and
 * the hand-written proxy histogram renders line for line as prom-client would.
 */
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

describe('SlessMetrics proxy series', () => {
  test('render as prom-client would: status codes, cumulative buckets with le inclusive, +Inf, sum and count', async () => {
    const metrics = new SlessMetrics({ isKnownFunction: (_ns, name) => name !== 'scan' });
    metrics.proxyResponse('default', 'hello', 200, 0.5);
    metrics.proxyResponse('default', 'hello', 200, 25); // exactly on the 0.025 bound
    metrics.proxyResponse('default', 'hello', 504, 31_000); // past the last bound: +Inf only
    metrics.proxyResponse('team', 'scan', 404, 1);
    metrics.proxyResponse('other', 'scan', 404, 2);
    const lines = (await metrics.render()).split('\n').filter((line) => line.includes('sless_proxy_'));
    const series = 'namespace="default",function="hello"';
    const bucket = (le: string, n: number) =>
      `sless_proxy_request_duration_seconds_bucket{le="${le}",${series}} ${n}`;
    expect(lines.slice(0, 5)).toEqual([
      '# HELP sless_proxy_requests_total Requests proxied to functions, by function and status code',
      '# TYPE sless_proxy_requests_total counter',
      `sless_proxy_requests_total{${series},code="200"} 2`,
      `sless_proxy_requests_total{${series},code="504"} 1`,
      'sless_proxy_requests_total{namespace="_unknown",function="_unknown",code="404"} 2',
    ]);
    expect(lines.slice(5, 22)).toEqual([
      '# HELP sless_proxy_request_duration_seconds Time to response headers for proxied requests',
      '# TYPE sless_proxy_request_duration_seconds histogram',
      bucket('0.005', 1),
      bucket('0.01', 1),
      bucket('0.025', 2),
      bucket('0.05', 2),
      bucket('0.1', 2),
      bucket('0.25', 2),
      bucket('0.5', 2),
      bucket('1', 2),
      bucket('2.5', 2),
      bucket('5', 2),
      bucket('10', 2),
      bucket('30', 2),
      bucket('+Inf', 3),
      `sless_proxy_request_duration_seconds_sum{${series}} 31.0255`,
      `sless_proxy_request_duration_seconds_count{${series}} 3`,
    ]);
    expect(lines).toContain(
      'sless_proxy_request_duration_seconds_count{namespace="_unknown",function="_unknown"} 2',
    );
  });
});
