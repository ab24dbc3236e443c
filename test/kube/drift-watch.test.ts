/**
 * The drift watch on a real API server, where managedFields are the server's own: the controller's
 * own rollout (a new image applied under its field manager) is not drift; an edit by someone else
 * and a change of replicas (the scaler's scale subresource, which records no manager) are.
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
beforeAll(async () => {
  env = await kubeEnv('drift');
  watch = new DriftWatch({
    http: env.http,
    logger,
    namespaces: [env.ns],
    onDrift: (owner: DriftOwner, _ns, name) => reports.push(`${owner} ${name}`),
  });
  watch.start();
});
afterAll(async () => {
  watch?.stop();
  await env?.close();
});

function deployment(image: string, replicas = 1): KubeObject {
  const labels = { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_COMPONENT]: 'function', [LABEL_FUNCTION]: 'fn' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'fn', namespace: env.ns, labels },
    spec: {
      replicas,
      selector: { matchLabels: { [LABEL_FUNCTION]: 'fn' } },
      template: { metadata: { labels }, spec: { containers: [{ name: 'function', image }] } },
    },
  };
}

/** The controller's own write: server-side apply under its field manager, forced. */
const applyAsController = (image: string, replicas = 1) =>
  apply(env.http, DEPLOYMENT, deployment(image, replicas), { force: true });

let edits = 0;
/** An edit of the image by another field manager, as `kubectl edit` makes it. */
const editByHand = () =>
  env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, 'fn'), {
    contentType: 'application/strategic-merge-patch+json',
    query: { fieldManager: 'kubectl-edit' },
    body: { spec: { template: { spec: { containers: [{ name: 'function', image: `hand:${++edits}` }] } } } },
  });

/**
 * Edits by hand and waits for that report. Events of one watch arrive in order, so once it is in,
 * every write before it was looked at too: what was not reported by then never will be.
 */
async function editAndAwaitReport(): Promise<void> {
  const before = reports.length;
  await editByHand();
  await eventually('the edit reported', async () => reports.length > before);
}

/**
 * managedFields times have one-second resolution, and writes by two managers within one second are
 * counted as drift on purpose; the controller's writes below start in a later second than the edit.
 */
const nextSecond = () => new Promise((r) => setTimeout(r, 1100));

describe('DriftWatch', () => {
  it("reports someone else's edit and a change of replicas, not the controller's own rollout", async () => {
    expect(FIELD_MANAGER).toBe('sless-controller');
    await applyAsController('registry.test/fn:v1');
    // The watch may list after the first edits: edit until one is reported, then once more.
    await eventually('the watch follows the Deployment', async () => {
      await editByHand();
      return reports.length > 0;
    });
    await editAndAwaitReport();
    reports.length = 0;

    await nextSecond();
    await applyAsController('registry.test/fn:v2');
    await applyAsController('registry.test/fn:v3');
    await editAndAwaitReport();
    expect(reports).toEqual(['Function fn']);

    // The scaler scales to zero through the scale subresource, which records no field manager.
    await env.http.request('PATCH', objectPath(DEPLOYMENT, env.ns, 'fn', 'scale'), {
      contentType: MERGE_PATCH,
      query: { fieldManager: 'sless-scaler' },
      body: { spec: { replicas: 0 } },
    });
    await eventually('the scale reported', async () => reports.length === 2);

    // The controller takes the image back and keeps the count: its own write again, not drift.
    await nextSecond();
    await applyAsController('registry.test/fn:v3', 0);
    await editAndAwaitReport();
    expect(reports).toEqual(['Function fn', 'Function fn', 'Function fn']);
  });
});
