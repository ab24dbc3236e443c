/**
 * forWatchCache, what the kube store keeps of a watched object: managedFields dropped, everything it
 * compares and hands out kept, and the object it was given left alone.
 */
import { describe, expect, it } from 'vitest';
import { forWatchCache } from './kube-store.js';
import type { KubeObject } from './objects.js';

/** A Function as the API server sends it in a watch event (managedFields as server-side apply writes them). */
function watched(): KubeObject {
  return {
    apiVersion: 'sless.dev/v1alpha1',
    kind: 'Function',
    metadata: {
      name: 'fn-1',
      namespace: 'team',
      uid: '0f6c3a52-5b1e-4c55-9d1a-2c1d9e8f7a10',
      resourceVersion: '4711',
      generation: 3,
      creationTimestamp: '2026-11-30T19:00:00Z',
      deletionTimestamp: '2026-11-30T19:05:00Z',
      labels: { 'sless.dev/source': 'repo' },
      annotations: { 'sless.dev/build-key': 'abc123' },
      finalizers: ['sless.dev/cleanup'],
      managedFields: [
        {
          manager: 'sless-controller',
          operation: 'Apply',
          apiVersion: 'sless.dev/v1alpha1',
          time: '2026-11-30T19:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:spec': { 'f:runtime': {} } },
        },
      ],
    },
    spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 128 },
    status: { phase: 'Ready', commit: 'c0ffee' },
  } as KubeObject;
}

describe('forWatchCache', () => {
  it('drops managedFields and keeps everything the store compares and hands out', () => {
    const { managedFields: _dropped, ...metadata } = watched().metadata;
    expect(forWatchCache(watched())).toEqual({ ...watched(), metadata });
    expect(forWatchCache(watched()).metadata).not.toHaveProperty('managedFields');
  });

  it('leaves the object it was given alone', () => {
    const object = watched();
    forWatchCache(object);
    expect(object).toEqual(watched());
  });
});
