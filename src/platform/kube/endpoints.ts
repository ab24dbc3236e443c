/**
 * What a function Service's EndpointSlices say: the addresses of its pods that may take requests,
 * and the origin at which such a pod's runtime answers. The one reading of them, for the route
 * cache (from its informer) and the scaler (from a list, without a cache).
 */
import { FUNCTION_PORT } from './labels.js';
import type { KubeObject } from './objects.js';

interface EndpointEntry {
  addresses?: string[];
  conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
  /** The pod behind the address (the EndpointSlice controller names it). */
  targetRef?: { kind?: string; name?: string };
}

/**
 * The ready endpoint addresses of `slices`, sorted. Not ready (failing its probe, or terminating:
 * Kubernetes marks a terminating endpoint not ready) is never taken; a condition left out means
 * ready, as the EndpointSlice API says its consumers are to read an unknown state. With `podAccepted`,
 * only endpoints whose pod it accepts are taken: one without a pod named is not.
 */
export function readyAddressesOf(
  slices: Iterable<KubeObject>,
  podAccepted?: (podName: string) => boolean,
): string[] {
  return addressesOf(slices, (conditions) => conditions?.ready !== false, podAccepted);
}

/**
 * The addresses of `slices` listed not ready but not terminating whose pod `podAccepted` takes,
 * sorted: the endpoints whose readiness something other than their probe revoked, once the caller
 * knows which pods those are (see route-cache.ts).
 */
export function notReadyAddressesOf(
  slices: Iterable<KubeObject>,
  podAccepted: (podName: string) => boolean,
): string[] {
  return addressesOf(slices, (conditions) => conditions?.ready === false, podAccepted);
}

function addressesOf(
  slices: Iterable<KubeObject>,
  taken: (conditions: EndpointEntry['conditions']) => boolean,
  podAccepted?: (podName: string) => boolean,
): string[] {
  const ready: string[] = [];
  for (const slice of slices) {
    const endpoints = (slice as { endpoints?: EndpointEntry[] }).endpoints ?? [];
    for (const endpoint of endpoints) {
      const conditions = endpoint.conditions;
      if (!taken(conditions) || conditions?.terminating === true) continue;
      if (podAccepted) {
        const pod = podOf(endpoint);
        if (pod === undefined || !podAccepted(pod)) continue;
      }
      const address = endpoint.addresses?.[0];
      if (address) ready.push(address);
    }
  }
  return ready.sort();
}

/**
 * Whether any endpoint of `slices` takes connections through the Service: a ready one, or one that
 * still serves while it terminates (kube-proxy falls back to those when none is ready). With none,
 * kube-proxy refuses connections to the Service address.
 */
export function anyServingAddress(slices: Iterable<KubeObject>): boolean {
  for (const slice of slices)
    for (const endpoint of (slice as { endpoints?: EndpointEntry[] }).endpoints ?? []) {
      const conditions = endpoint.conditions;
      const ready = conditions?.ready !== false && conditions?.terminating !== true;
      if ((ready || conditions?.serving === true) && endpoint.addresses?.[0]) return true;
    }
  return false;
}

function podOf(endpoint: EndpointEntry): string | undefined {
  const ref = endpoint.targetRef;
  return ref?.kind === 'Pod' ? ref.name : undefined;
}

/** Where a pod at `address` (IPv4 or IPv6) answers: the runtime's port. */
export function addressOrigin(address: string): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${FUNCTION_PORT}`;
}
