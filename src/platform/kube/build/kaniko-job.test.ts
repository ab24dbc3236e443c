import { describe, expect, it } from 'vitest';
import type { SlessFunction } from '../../../core/resources.js';
import { type KanikoSettings, kanikoArgs, mirroredImage } from './kaniko-job.js';

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
});
