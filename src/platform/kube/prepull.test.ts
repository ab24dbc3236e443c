/**
 * The pre-pull DaemonSet as data: which images it pulls (each runtime's base as build pods name it,
 * mirrored the same way, once each, sorted; the kaniko image first), and that every container in it
 * runs unprivileged with no token. Applying and keeping it is test/kube/rbac.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import { INSTALL_IMAGES } from '../../packaging/install-step.js';
import { KANIKO_IMAGE } from './build/kaniko-job.js';
import { PREPULL_NAME, prepullDaemonSet, prepullImages } from './prepull.js';

interface Container {
  name: string;
  image: string;
  command: string[];
  securityContext: Record<string, unknown>;
}

describe('prepull', () => {
  it('pulls each runtime base once, mirrored as build pods mirror it, sorted', () => {
    const settings = {
      controllerNamespace: 'sless-system',
      registryMap: ['index.docker.io=mirror.test/hub'],
    };
    expect(prepullImages(['python3.11', 'nodejs20', 'python3.11', 'nodejs20'], settings)).toEqual([
      'mirror.test/hub/library/node:20.20.2-bookworm-slim',
      'mirror.test/hub/library/python:3.11.13-slim-bookworm',
    ]);
    expect(prepullImages([], settings)).toEqual([]);
    expect(prepullImages(['go1.21'], { controllerNamespace: 'x' })).toEqual([INSTALL_IMAGES['go1.21']]);
  });

  it('is a DaemonSet of unprivileged containers without a token: kaniko, then each base, then one idle', () => {
    const bases = ['node:20.20.2-bookworm-slim', 'python:3.11.13-slim-bookworm'];
    const ds = prepullDaemonSet({ controllerNamespace: 'sless-system' }, bases);
    expect(ds.metadata).toMatchObject({ name: PREPULL_NAME, namespace: 'sless-system' });
    const pod = (ds.spec as { template: { spec: Record<string, unknown> } }).template.spec;
    expect(pod.automountServiceAccountToken).toBe(false);
    const init = pod.initContainers as Container[];
    const main = pod.containers as Container[];
    expect(init.map((c) => [c.name, c.image, c.command.join(' ')])).toEqual([
      ['kaniko', KANIKO_IMAGE, '/kaniko/executor version'],
      ['base-0', bases[0], 'sh -c exit 0'],
      ['base-1', bases[1], 'sh -c exit 0'],
    ]);
    expect(main.map((c) => c.image)).toEqual([bases[0]]);
    for (const c of [...init, ...main])
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
    // The operator's kaniko image is the one pulled, as build pods use it.
    const own = prepullDaemonSet({ controllerNamespace: 'x', kanikoImage: 'registry.test/kaniko:1' }, bases);
    const ownInit = (own.spec as { template: { spec: { initContainers: Container[] } } }).template.spec
      .initContainers;
    expect(ownInit[0]?.image).toBe('registry.test/kaniko:1');
  });
});
