/**
 * The drift watch on a real API server, where managedFields are the server's own: the controller's
 * own rollout (a new image applied under its field manager) is not drift; an edit by someone else
 * and a change of replicas (the scaler's scale subresource, which records no manager) are. (The
 * controller's apply that takes a field back from another manager may be reported too: a reconcile
 * too many, which is the safe side, and not asserted either way here.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIELD_MANAGER } from '../../src/core/resources.js';
import { type DriftOwner, DriftWatch } from '../../src/platform/kube/drift-watch.js';
import { MERGE_PATCH } from '../../src/platform/kube/http.js';
import {
  LABEL_COMPONENT,
  LABEL_FUNCTION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../../src/platform/kube/labels.js';
import { apply, type KubeObject } from '../../src/platform/kube/objects.js';
import { DEPLOYMENT, objectPath } from '../../src/platform/kube/resource-types.js';
import { eventually, type KubeEnv, kubeEnv, logger } from './harness.js';

let env: KubeEnv;
let watch: DriftWatch;
const reports: string[] = [];
const causes: string[] = [];
beforeAll(async () => {
  env = await kubeEnv('drift');
  watch = new DriftWatch({
    http: env.http,
    logger,
    namespaces: [env.ns],
    onDrift: (owner: DriftOwner, _ns, name, cause) => {
      reports.push(`${owner} ${name}`);
      causes.push(`${name} ${cause}`);
    },
  });
  watch.start();
});
afterAll(async () => {
  watch?.stop();
  await env?.close();
});

function deployment(name: string, image: string, replicas = 1): KubeObject {
  const labels = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function', [LABEL_FUNCTION]: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: env.ns, labels },
    spec: {
      replicas,
      selector: { matchLabels: { [LABEL_FUNCTION]: name } },
      template: { metadata: { labels }, spec: { containers: [{ name: 'function', image }] } },
    },
  };
}

/** The controller's own write: server-side apply under its field manager, forced. */
const applyAsController = (image: string, replicas = 1) =>
  apply(env.http, DEPLOYMENT, deployment('fn', image, replicas), { force: true });

let edits = 0;
/** An edit of the image by another field manager, as `kubectl edit` makes it. */
const editByHand = (name: string) =>
  env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, name), {
    contentType: 'application/strategic-merge-patch+json',
    query: { fieldManager: 'kubectl-edit' },
    body: { spec: { template: { spec: { containers: [{ name: 'function', image: `hand:${++edits}` }] } } } },
  });

const reportsOf = (name: string) => reports.filter((r) => r === `Function ${name}`);

/**
 * Edits by hand and waits for that report. Events of one watch arrive in order, so once it is in,
 * every write before it was looked at too: what was not reported by then never will be.
 */
async function editAndAwaitReport(): Promise<void> {
  const before = reportsOf('fn').length;
  await editByHand('fn');
  await eventually('the edit reported', async () => reportsOf('fn').length > before);
}

describe('DriftWatch', () => {
  it("reports someone else's edit and a change of replicas, not the controller's own rollout", async () => {
    expect(FIELD_MANAGER).toBe('sless-controller');
    // The watch lists at some point after start: edit a probe until an edit of it is reported.
    await apply(env.http, DEPLOYMENT, deployment('probe', 'registry.test/probe:v1'), { force: true });
    await eventually('the watch follows', async () => {
      await editByHand('probe');
      return reportsOf('probe').length > 0;
    });
    // From here the watch sees every event of `fn`, in order.
    await applyAsController('registry.test/fn:v1');
    await applyAsController('registry.test/fn:v2');
    await applyAsController('registry.test/fn:v3');
    await editAndAwaitReport();
    expect(reportsOf('fn')).toEqual(['Function fn']);

    // The scaler scales to zero through the scale subresource, which records no field manager.
    await env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, 'fn', 'scale'), {
      contentType: MERGE_PATCH,
      query: { fieldManager: 'sless-scaler' },
      body: { spec: { replicas: 0 } },
    });
    await eventually('the scale reported', async () => reportsOf('fn').length === 2);
  });

  it('reports a change of ready instances alone, for status, and not a status write that keeps them', async () => {
    await apply(env.http, DEPLOYMENT, deployment('ready', 'registry.test/ready:v1', 2), { force: true });
    const setStatus = (status: Record<string, number>) =>
      env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, 'ready', 'status'), {
        contentType: MERGE_PATCH,
        body: { status },
      });
    const causesOf = () => causes.filter((c) => c.startsWith('ready '));
    // The watch sees `ready` from its first change on: one pod becomes ready.
    await setStatus({ replicas: 2, readyReplicas: 1, observedGeneration: 1 });
    await eventually('a ready pod reported', async () => causesOf().length === 1);
    expect(causesOf()).toEqual(['ready instances']);
    // A status write that keeps the ready count (a condition's heartbeat) is nothing to report;
    // then the second pod becomes ready, and that is.
    await setStatus({ replicas: 2, readyReplicas: 1, observedGeneration: 1, updatedReplicas: 2 });
    await setStatus({ replicas: 2, readyReplicas: 2, observedGeneration: 1, updatedReplicas: 2 });
    await eventually('the second ready pod reported', async () => causesOf().length === 2);
    expect(causesOf()).toEqual(['ready instances', 'ready instances']);
  });
});
