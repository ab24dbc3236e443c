/**
 * The kaniko build Job: its golden arguments, registry mirrors and insecure hosts, the pod's own images
 * pulled through the registry map, each newer runtime built on its own pinned base image with its
 * language's steps and the code as the last layer, and package mirrors given to the install step only.
 */
import { describe, expect, it } from 'vitest';
import type { SlessFunction } from '../../../core/resources.js';
import { RUNTIME_INFO } from '../../../core/runtimes.js';
import { RUNTIMES } from '../../../core/schemas.js';
import { finalDockerfile } from '../../../packaging/install-step.js';
import { type KanikoSettings, kanikoArgs, kanikoJob, mirroredImage } from './kaniko-job.js';

const fn = {
  apiVersion: 'sless.dev/v1alpha1',
  kind: 'Function',
  metadata: { name: 'hello', namespace: 'team-a' },
  spec: { runtime: 'nodejs20', entrypoint: 'handler.handle' },
} as unknown as SlessFunction;

const settings: KanikoSettings = {
  controllerNamespace: 'sless-system',
  registry: '10.0.0.5:5000/sless',
  bucket: 'builds',
  s3Endpoint: 'http://10.0.0.5:7070',
  s3Region: 'us-east-1',
  s3CredentialsSecret: 'sless-s3',
  pushSecret: 'sless-registry-push',
};
const sha = 'a'.repeat(40);

describe('kaniko arguments', () => {
  it('are the golden list for a plain registry', () => {
    expect(kanikoArgs(settings, fn, sha)).toEqual([
      '--context=dir:///workspace',
      '--dockerfile=/sless/dockerfile/Dockerfile',
      `--destination=10.0.0.5:5000/sless/team-a-hello:${sha}`,
      '--digest-file=/dev/termination-log',
      '--snapshot-mode=redo',
    ]);
  });

  it('map base-image registries to mirrors, and mark the registry and mirror hosts insecure by host', () => {
    const args = kanikoArgs(
      {
        ...settings,
        insecureRegistry: true,
        registryMap: ['index.docker.io=10.0.0.5:5000', 'gcr.io=mirror.local:5001/gcr'],
      },
      fn,
      sha,
    );
    expect(args.slice(5)).toEqual([
      '--registry-map=index.docker.io=10.0.0.5:5000',
      '--registry-map=gcr.io=mirror.local:5001/gcr',
      '--insecure-registry=10.0.0.5:5000',
      '--insecure-registry=mirror.local:5001',
    ]);
  });

  it("pull the pod's own images through the registry map too, first mirror of the registry wins", () => {
    const map = ['index.docker.io=10.0.0.5:5000', 'gcr.io=mirror.local:5001/gcr', 'docker.io=second:1'];
    expect(mirroredImage('node:20.20.2-bookworm-slim', map)).toBe(
      '10.0.0.5:5000/library/node:20.20.2-bookworm-slim',
    );
    expect(mirroredImage('docker.io/bitnami/kubectl:1.30', map)).toBe('10.0.0.5:5000/bitnami/kubectl:1.30');
    expect(mirroredImage('gcr.io/distroless/static:nonroot', map)).toBe(
      'mirror.local:5001/gcr/distroless/static:nonroot',
    );
    expect(mirroredImage('quay.io/x/y:1', map)).toBe('quay.io/x/y:1');
    expect(mirroredImage('node:20', [])).toBe('node:20');
  });

  it.each(RUNTIMES.filter((r) => !['nodejs20', 'python3.11', 'go1.21'].includes(r)))(
    "%s installs and runs on its own pinned base image, with its language's steps and layout",
    (runtime) => {
      const info = RUNTIME_INFO[runtime];
      const fnOf = { ...fn, spec: { ...fn.spec, runtime, entrypoint: 'handler.Handle' } } as SlessFunction;
      const job = kanikoJob(settings, {
        name: 'b',
        fn: fnOf,
        commit: sha,
        buildKey: 'k',
        contextUrl: 'http://c',
      });
      const pod = (
        job.spec as { template: { spec: { initContainers: { image: string; command: string[] }[] } } }
      ).template.spec;
      expect(pod.initContainers[0]?.image).toBe(info.baseImage);
      const dockerfile = finalDockerfile(runtime);
      const args = kanikoArgs(settings, fnOf, sha);
      if (info.family === 'go') {
        expect(pod.initContainers[0]?.command[2]).toContain('bash /workspace/build.sh');
        expect(dockerfile).toContain('ENTRYPOINT ["/sless/function"]');
        expect(args).toContain('--build-arg=SLESS_ENTRYPOINT=handler.Handle');
      } else {
        expect(dockerfile.split('\n')[0]).toBe(`FROM ${info.baseImage}`);
        // The code is the last layer, whatever the line of the language.
        expect(
          dockerfile
            .split('\n')
            .filter((l) => l.startsWith('COPY'))
            .at(-1),
        ).toBe('COPY code/ /sless/code/');
        expect(args.some((a) => a.startsWith('--build-arg'))).toBe(false);
      }
    },
  );

  it('give the package mirror settings to the install step alone, after its own settings', () => {
    const goFn = {
      ...fn,
      spec: { ...fn.spec, runtime: 'go1.21', entrypoint: 'handler.Handle' },
    } as SlessFunction;
    const job = kanikoJob(
      {
        ...settings,
        packageMirrors: [
          { name: 'GOPROXY', value: 'http://10.0.0.5:3000' },
          { name: 'PIP_INDEX_URL', value: 'http://10.0.0.5:3001/simple/' },
        ],
      },
      { name: 'b', fn: goFn, commit: sha, buildKey: 'k', contextUrl: 'http://c' },
    );
    type Container = { name: string; env?: { name: string; value?: string }[] };
    const pod = (job.spec as { template: { spec: { initContainers: Container[]; containers: Container[] } } })
      .template.spec;
    expect(pod.initContainers[0]?.env).toEqual([
      { name: 'SLESS_CONTEXT_URL', value: 'http://c' },
      { name: 'HOME', value: '/tmp' },
      { name: 'SLESS_ENTRYPOINT', value: 'handler.Handle' },
      { name: 'GOCACHE', value: '/tmp/go-build' },
      { name: 'GOPATH', value: '/tmp/go' },
      { name: 'GOTOOLCHAIN', value: 'auto' },
      { name: 'CGO_ENABLED', value: '0' },
      { name: 'GOPROXY', value: 'http://10.0.0.5:3000' },
      { name: 'PIP_INDEX_URL', value: 'http://10.0.0.5:3001/simple/' },
    ]);
    // Neither sless's own step nor kaniko, which holds the push secret, is given them.
    for (const container of [...pod.initContainers.slice(1), ...pod.containers])
      expect((container.env ?? []).map((e) => e.name)).toEqual(
        container.name === 'kaniko' ? [] : ['SLESS_DOCKERFILE'],
      );
  });
});
