/**
 * Golden HTTP statuses of every typed error a route can meet: the category an error carries decides
 * its answer, so a new error class that forgets its category shows here as a 502.
 */
import { describe, expect, it } from 'vitest';
import {
  BadRequestError,
  BuildError,
  ConflictError,
  NotFoundError,
  RolloutError,
  SourceError,
  UnavailableError,
  ValidationError,
} from '../core/errors.js';
import { Reason } from '../core/status.js';
import { ApplyConflictError } from '../platform/kube/objects.js';
import { DEPLOYMENT } from '../platform/kube/resource-types.js';
import { PullSecretError } from '../platform/kube/tenant.js';
import { OutboundRefusedError } from '../source/outbound.js';
import { BodyValidationError, ForbiddenError, UnauthorizedError } from './errors.js';
import { httpStatusOf } from './http-status.js';

describe('httpStatusOf', () => {
  it.each([
    [
      'a manifest issue',
      new ValidationError([{ file: 'f.yaml', index: 0, field: 'spec', reason: 'bad' }]),
      400,
    ],
    ['a body issue', new BodyValidationError([{ file: '', index: 0, field: 'spec', reason: 'bad' }]), 400],
    ['a bad request', new BadRequestError('no'), 400],
    ['no credentials', new UnauthorizedError('who?'), 401],
    ['another tenant', new ForbiddenError('not yours'), 403],
    ['a missing object', new NotFoundError('gone'), 404],
    ['a conflict', new ConflictError('taken'), 409],
    ['an owned object', new ConflictError('owned', Reason.OwnershipConflict), 409],
    [
      'a field another manager owns',
      new ApplyConflictError(
        DEPLOYMENT,
        { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace: 'ns', name: 'd' } },
        'conflict',
        undefined,
      ),
      409,
    ],
    ['git failing', new SourceError('cannot fetch'), 502],
    ['an address refused', new OutboundRefusedError('private address'), 502],
    ['a build failing', new BuildError('kaniko failed', ''), 502],
    ['a rollout failing', new RolloutError('pods not ready'), 502],
    ['a missing pull secret', new PullSecretError('no pull secret'), 503],
    ['a JWKS endpoint down', new UnavailableError('jwks unreachable'), 503],
  ])('%s answers its status', (_what, error, status) => {
    expect(httpStatusOf(error)).toBe(status);
  });

  it('keeps the reason a typed error was given', () => {
    expect(new ConflictError('owned', Reason.OwnershipConflict).reason).toBe('OwnershipConflict');
    expect(new PullSecretError('x').reason).toBe('RolloutFailed');
  });
});
