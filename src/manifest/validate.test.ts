import { describe, expect, it } from 'vitest';
import { formatIssue } from '../core/errors.js';
import { validateResource } from './validate.js';

const where = { file: 'functions/a/function.yaml', index: 0 };

function fn(spec: Record<string, unknown>, name = 'a') {
  return { apiVersion: 'sless.dev/v1alpha1', kind: 'Function', metadata: { name }, spec };
}

function messages(kind: 'Function' | 'Trigger' | 'FunctionJob' | 'GitSource', doc: unknown): string[] {
  return validateResource(kind, doc, where).map(formatIssue);
}

describe('validateResource', () => {
  it('accepts a minimal function and fills defaults without clamping', () => {
    const doc = fn({ runtime: 'nodejs20', entrypoint: 'handler.handle' });
    expect(messages('Function', doc)).toEqual([]);
    expect(doc.spec).toMatchObject({ memoryMb: 128, timeoutSec: 30, replicas: 1 });
  });

  it.each([
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 4097 },
      'functions/a/function.yaml#0 spec.memoryMb: must be <= 4096',
    ],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 0 },
      'functions/a/function.yaml#0 spec.memoryMb: must be >= 1',
    ],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: -10 },
      'functions/a/function.yaml#0 spec.memoryMb: must be >= 1',
    ],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 999999 },
      'functions/a/function.yaml#0 spec.memoryMb: must be <= 4096',
    ],
    [
      { runtime: 'ruby', entrypoint: 'handler.handle' },
      'functions/a/function.yaml#0 spec.runtime: must be one of: nodejs20, python3.11, go1.21',
    ],
    [{ runtime: 'nodejs20' }, 'functions/a/function.yaml#0 spec.entrypoint: is required'],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', memroyMb: 1 },
      'functions/a/function.yaml#0 spec.memroyMb: unknown field',
    ],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', env: { SLESS_X: 'y' } },
      'functions/a/function.yaml#0 spec.env.SLESS_X: is reserved for the runtime',
    ],
    [
      { runtime: 'nodejs20', entrypoint: 'handler.handle', env: { 'A-B': 'y' } },
      'functions/a/function.yaml#0 spec.env.A-B: must be a valid environment variable name',
    ],
  ])('rejects %j', (spec, expected) => {
    expect(messages('Function', fn(spec))).toContain(expected);
  });

  it('never clamps: the rejected value stays as written', () => {
    const doc = fn({ runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 999999 });
    messages('Function', doc);
    expect(doc.spec.memoryMb).toBe(999999);
  });

  it('requires DNS-1123 names', () => {
    expect(messages('Function', fn({ runtime: 'nodejs20', entrypoint: 'h.h' }, 'Bad_Name'))).toEqual([
      'functions/a/function.yaml#0 metadata.name: must be a DNS-1123 label (lowercase letters, digits and "-")',
    ]);
  });

  it('checks trigger types and cron schedules', () => {
    const trigger = (spec: Record<string, unknown>) => ({
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 't' },
      spec,
    });
    expect(messages('Trigger', trigger({ type: 'queue', function: 'a' }))).toEqual([
      'functions/a/function.yaml#0 spec.type: must be one of: http, cron',
    ]);
    expect(messages('Trigger', trigger({ type: 'cron', function: 'a' }))).toEqual([
      'functions/a/function.yaml#0 spec.schedule: is required for a cron trigger',
    ]);
    expect(messages('Trigger', trigger({ type: 'cron', function: 'a', schedule: '61 * * * *' }))[0]).toMatch(
      /spec\.schedule: invalid cron schedule/,
    );
    expect(messages('Trigger', trigger({ type: 'cron', function: 'a', schedule: '*/5 * * * *' }))).toEqual(
      [],
    );
  });

  it('refuses git URLs with embedded credentials', () => {
    const source = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'GitSource',
      metadata: { name: 's' },
      spec: { url: 'https://user:token@example.com/r.git' },
    };
    expect(messages('GitSource', source)).toEqual([
      'functions/a/function.yaml#0 spec.url: must not embed credentials; use spec.secretRef',
    ]);
  });
});
