/**
 * An async invocation asked with a callback URL, and the answer sless gives when it refuses that URL,
 * shared by the local and the kube async suites so that both hold the same refusal.
 */
import { expect } from 'vitest';

/** The request that queues an async invocation with `callback` as its x-callback-url. */
export function withCallback(callback: string): RequestInit {
  return { method: 'POST', headers: { 'x-callback-url': callback }, body: 'x' };
}

/** A 400 whose error names the header and why its address is refused. */
export async function expectCallbackRefused(response: Response): Promise<void> {
  expect(response.status).toBe(400);
  const { error } = (await response.json()) as { error: string };
  expect(error).toMatch(/^x-callback-url: /);
  expect(error).toMatch(/loopback|link-local|metadata/);
}
