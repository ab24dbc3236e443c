/**
 * The spec defaults (timeout, memory, replicas, branch): their values, agreement with what validation
 * fills into a manifest, and giving way to what a spec sets, so readers and validation cannot drift apart.
 */
import { describe, expect, it } from 'vitest';
import { validateResource } from '../manifest/validate.js';
import {
  branchOf,
  DEFAULT_BRANCH,
  DEFAULT_MEMORY_MB,
  DEFAULT_REPLICAS,
  DEFAULT_TIMEOUT_SEC,
  memoryMbOf,
  replicasOf,
  timeoutSecOf,
} from './defaults.js';
import type { GitSource, SlessFunction } from './resources.js';

describe('spec defaults', () => {
  it('are the documented values', () => {
    expect({ DEFAULT_TIMEOUT_SEC, DEFAULT_MEMORY_MB, DEFAULT_REPLICAS, DEFAULT_BRANCH }).toEqual({
      DEFAULT_TIMEOUT_SEC: 30,
      DEFAULT_MEMORY_MB: 128,
      DEFAULT_REPLICAS: 1,
      DEFAULT_BRANCH: 'main',
    });
  });

  it('agree with what validation fills in on the way in', () => {
    const fn = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name: 'f', namespace: 'default' },
      spec: { runtime: 'nodejs20', entrypoint: 'index.handler' },
    };
    const source = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'GitSource',
      metadata: { name: 's', namespace: 'default' },
      spec: { url: 'https://example.com/r.git' },
    };
    const bare = structuredClone(fn) as unknown as SlessFunction;
    expect(validateResource('Function', fn, { file: 'f.yaml', index: 0 })).toEqual([]);
    expect(validateResource('GitSource', source, { file: 's.yaml', index: 0 })).toEqual([]);
    const filled = fn as unknown as SlessFunction;
    expect([filled.spec.timeoutSec, filled.spec.memoryMb, filled.spec.replicas]).toEqual([
      timeoutSecOf(bare),
      memoryMbOf(bare),
      replicasOf(bare),
    ]);
    expect((source as unknown as GitSource).spec.branch).toBe(branchOf({ spec: {} } as unknown as GitSource));
  });

  it('yield to what a spec sets', () => {
    const fn = { spec: { timeoutSec: 5, memoryMb: 64, replicas: 0 } } as unknown as SlessFunction;
    expect([timeoutSecOf(fn), memoryMbOf(fn), replicasOf(fn)]).toEqual([5, 64, 0]);
    expect(branchOf({ spec: { branch: 'dev' } } as unknown as GitSource)).toBe('dev');
  });
});
