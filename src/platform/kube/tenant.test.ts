/**
 * The objects sless applies in a tenant namespace: the pull secret copy (pinned byte for byte, as
 * server-side apply compares it), the NetworkPolicy admitting only controller and cron Trigger pods to
 * function pods, selectors matching the labels pods really get, and the pull-secret settings, which
 * never let the push secret be handed to tenants.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../config/config.js';
import { loadKubeControllerConfig, pullSecretConfig } from '../../config/kube.js';
import type { SlessFunction, Trigger } from '../../core/resources.js';
import { cronJobFor } from './cron-scheduler.js';
import {
  FUNCTION_POD_SELECTOR,
  functionsNetworkPolicy,
  pullSecretCopy,
  TRIGGER_POD_SELECTOR,
} from './tenant.js';
import { functionLabels } from './workload-manifests.js';

describe('tenant manifests', () => {
  it('copies the pull secret as dockerconfigjson, same bytes, labelled sless', () => {
    const copy = pullSecretCopy('team-a', 'sless-registry-pull', 'eyJhdXRocyI6e319', 'sless-system/pull-src');
    expect(copy).toEqual({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'sless-registry-pull',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'sless' },
        annotations: { 'sless.dev/pull-secret-source': 'sless-system/pull-src' },
      },
      type: 'kubernetes.io/dockerconfigjson',
      data: { '.dockerconfigjson': 'eyJhdXRocyI6e319' },
    });
    // Server-side apply compares what we send: the serialised form, key order included, is pinned.
    expect(JSON.stringify(pullSecretCopy('a', 'b', 'c', 'd'))).toBe(
      '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b","namespace":"a",' +
        '"labels":{"app.kubernetes.io/managed-by":"sless"},"annotations":{"sless.dev/pull-secret-source":"d"}},' +
        '"type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":"c"}}',
    );
  });

  it('admits only the controller pods (and the namespace’s cron Trigger pods) to function pods on 8080', () => {
    const policy = functionsNetworkPolicy('team-a', 'sless-system');
    expect(policy).toEqual({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: 'sless-functions',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'sless' },
      },
      spec: {
        podSelector: {
          matchLabels: { 'app.kubernetes.io/component': 'function', 'app.kubernetes.io/managed-by': 'sless' },
        },
        policyTypes: ['Ingress'],
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'sless-system' } },
                podSelector: { matchLabels: { 'app.kubernetes.io/name': 'sless-controller' } },
              },
            ],
            ports: [{ protocol: 'TCP', port: 8080 }],
          },
          {
            from: [
              {
                podSelector: {
                  matchLabels: {
                    'app.kubernetes.io/component': 'trigger',
                    'app.kubernetes.io/managed-by': 'sless',
                  },
                },
              },
            ],
            ports: [{ protocol: 'TCP', port: 8080 }],
          },
        ],
      },
    });
    // Two namespaces get two policies that differ only where they must.
    const other = functionsNetworkPolicy('team-b', 'sless-ctl') as typeof policy;
    expect(other.metadata).toEqual({ ...policy.metadata, namespace: 'team-b' });
    expect(JSON.stringify(other.spec)).toBe(
      JSON.stringify(policy.spec).replace('"sless-system"', '"sless-ctl"'),
    );
  });

  it('selects the pods KubeWorkloads and the cron scheduler actually label', () => {
    const fn = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Function',
      metadata: { name: 'hello', namespace: 'team-a', uid: 'u1' },
      spec: { runtime: 'nodejs20', entrypoint: 'handler.handler', source: {} },
    } as unknown as SlessFunction;
    expect(functionLabels(fn)).toMatchObject(FUNCTION_POD_SELECTOR);
    const trigger = {
      apiVersion: 'sless.dev/v1alpha1',
      kind: 'Trigger',
      metadata: { name: 'tick', namespace: 'team-a', uid: 'u2' },
      spec: { type: 'cron', function: 'hello', schedule: '* * * * *' },
    } as unknown as Trigger;
    const cron = cronJobFor(trigger, fn) as unknown as {
      spec: { jobTemplate: { spec: { template: { metadata: { labels: Record<string, string> } } } } };
    };
    expect(cron.spec.jobTemplate.spec.template.metadata.labels).toMatchObject(TRIGGER_POD_SELECTOR);
  });
});

describe('pull secret configuration', () => {
  const base = {
    SLESS_CONTROLLER_NAMESPACE: 'sless-system',
    SLESS_REGISTRY: 'registry.example.com:5000/sless',
    SLESS_S3_ENDPOINT: 'https://s3.example.com',
    SLESS_S3_BUCKET: 'builds',
    AWS_ACCESS_KEY_ID: 'id',
    AWS_SECRET_ACCESS_KEY: 'secret',
  };
  const load = (env: Record<string, string | undefined>) =>
    loadKubeControllerConfig({ host: '127.0.0.1' }, { ...base, ...env });

  it('defaults the source to the first image pull secret', () => {
    expect(load({}).pullSecret).toEqual({ source: 'sless-registry-pull', name: 'sless-registry-pull' });
    expect(load({ SLESS_IMAGE_PULL_SECRETS: 'a,b', SLESS_PULL_SECRET: 'src' }).pullSecret).toEqual({
      source: 'src',
      name: 'a',
    });
    expect(load({ SLESS_IMAGE_PULL_SECRETS: '' }).pullSecret).toBeUndefined();
  });

  it('refuses the push secret as the pull secret: tenants can pull but never push', () => {
    expect(() => load({ SLESS_PULL_SECRET: 'sless-registry-push' })).toThrow(ConfigError);
    expect(() => load({ SLESS_PULL_SECRET: 'sless-registry-push' })).toThrow('SLESS_PULL_SECRET');
    expect(() => load({ SLESS_PUSH_SECRET: 'creds', SLESS_IMAGE_PULL_SECRETS: 'creds' })).toThrow(
      'SLESS_IMAGE_PULL_SECRETS',
    );
    expect(() => pullSecretConfig('push', ['pull', 'push'], undefined)).toThrow(ConfigError);
  });

  it('refuses a source without a referenced pull secret, and names that are not Secret names', () => {
    expect(() => load({ SLESS_IMAGE_PULL_SECRETS: '', SLESS_PULL_SECRET: 'src' })).toThrow(ConfigError);
    expect(() => load({ SLESS_PULL_SECRET: 'Not_A_Name' })).toThrow(ConfigError);
  });
});
