/**
 * A commit revision's Deployment and Service: named from the URL's 12 digits, one replica whatever the
 * function asks, probed every second, labelled as the function's (so the caches and build GC see it)
 * while its pods carry no function label (so the function's own Service never selects them), and a
 * Service selecting exactly its pods.
 */
import { describe, expect, it } from 'vitest';
import type { BuildRecord, SlessFunction } from '../../core/resources.js';
import {
  commitDeploymentFor,
  commitDeploymentName,
  commitRevisionOf,
  commitServiceFor,
} from './commit-manifests.js';
import { serviceFor } from './workload-manifests.js';

const COMMIT = `${'c'.repeat(12)}${'d'.repeat(28)}`;
const fn: SlessFunction = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'hello', namespace: 'team', uid: 'u-1' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle', memoryMb: 64, timeoutSec: 10, replicas: 3 },
};
const build: BuildRecord = {
  buildKey: 'k'.repeat(20),
  commit: COMMIT,
  result: 'Succeeded',
  startedAt: 't',
  image: `reg/team-hello:${COMMIT}@sha256:${'b'.repeat(64)}`,
};

interface DeploymentSpec {
  replicas: number;
  selector: { matchLabels: Record<string, string> };
  template: {
    metadata: { labels: Record<string, string> };
    spec: { containers: { image: string; readinessProbe: { periodSeconds: number } }[] };
  };
}

describe('commit revision manifests', () => {
  const deployment = commitDeploymentFor(fn, build, { imagePullSecrets: [], lastRequest: 'now' });
  const spec = deployment.spec as DeploymentSpec;

  it('are named from the 12 digits a URL may give, the full SHA naming the same', () => {
    expect(commitDeploymentName('hello', COMMIT)).toBe('hello-at-cccccccccccc');
    expect(commitDeploymentName('hello', COMMIT.slice(0, 12))).toBe('hello-at-cccccccccccc');
    expect(deployment.metadata.name).toBe('hello-at-cccccccccccc');
    expect(commitRevisionOf(deployment)).toEqual({ fn: 'hello', commit: COMMIT });
  });

  it("run the build's image once, probed every second, the request noted", () => {
    expect(spec.replicas).toBe(1);
    expect(spec.template.spec.containers[0]?.image).toBe(build.image);
    expect(spec.template.spec.containers[0]?.readinessProbe.periodSeconds).toBe(1);
    expect(deployment.metadata.annotations?.['sless.dev/last-request']).toBe('now');
    expect(deployment.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Function', uid: 'u-1' });
  });

  it("carry the function's labels on the Deployment, never on its pods", () => {
    expect(deployment.metadata.labels).toMatchObject({
      'sless.dev/function': 'hello',
      'app.kubernetes.io/component': 'function',
      'app.kubernetes.io/managed-by': 'sless',
    });
    const pods = spec.template.metadata.labels;
    expect(pods['sless.dev/function']).toBeUndefined();
    // The function's own Service selects by labels its pods must not have.
    const own = (serviceFor(fn).spec as { selector: Record<string, string> }).selector;
    expect(Object.entries(own).every(([k, v]) => pods[k] === v)).toBe(false);
    // The NetworkPolicy's selector still takes them.
    expect(pods).toMatchObject({
      'app.kubernetes.io/component': 'function',
      'app.kubernetes.io/managed-by': 'sless',
    });
  });

  it('have a Service of their own that selects exactly their pods', () => {
    const service = commitServiceFor(fn, COMMIT);
    const selector = (service.spec as { selector: Record<string, string> }).selector;
    expect(service.metadata.name).toBe('hello-at-cccccccccccc');
    expect(service.metadata.labels?.['sless.dev/function']).toBe('hello');
    expect(selector).toEqual(spec.selector.matchLabels);
    expect(Object.entries(selector).every(([k, v]) => spec.template.metadata.labels[k] === v)).toBe(true);
  });
});
