/**
 * `POST /internal/v1/replica-concurrency`: where the leader takes the other replicas' concurrency
 * reports (and the canary counts they carry). Anyone who can reach the controller can reach this route (tenants' pods included), so a
 * report counts only when it is signed with the replicas' shared key; the signature is checked over
 * the exact bytes before the body is read, and a refused report changes nothing. It runs in its own
 * encapsulated context so that it alone keeps raw bodies.
 */
import type { FastifyInstance } from 'fastify';
import { BadRequestError, ConflictError, UnavailableError } from '../../core/errors.js';
import {
  parseReport,
  REPLICA_REPORT_PATH,
  REPLICA_SIGNATURE_HEADER,
  type ReplicaReportIntake,
  signatureMatches,
} from '../../core/replica-report.js';
import { UnauthorizedError } from '../errors.js';
import { errorResponses } from '../schemas.js';

/** Ten thousand functions' averages fit; anything larger is a 413 before any signature work. */
const BODY_LIMIT = 4 * 1024 * 1024;

export async function replicaReportRoutes(
  app: FastifyInstance,
  options: { intake: ReplicaReportIntake },
): Promise<void> {
  const { intake } = options;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, body, done) =>
    done(null, body),
  );
  app.post<{ Body: Buffer | undefined }>(
    REPLICA_REPORT_PATH,
    {
      bodyLimit: BODY_LIMIT,
      schema: {
        summary:
          "Another controller replica's in-flight requests per function and canary answer counts, for the leader's autoscaling and canary judging",
        description: `Signed by the controller replicas' shared key (${REPLICA_SIGNATURE_HEADER}); not for clients.`,
        tags: ['internal'],
        headers: {
          type: 'object',
          properties: { [REPLICA_SIGNATURE_HEADER]: { type: 'string' } },
        },
        response: {
          200: { type: 'object', properties: { applied: { type: 'boolean' } } },
          ...errorResponses(400, 401, 409, 413, 503),
        },
      },
    },
    async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const key = await intake.key();
      if (!key) throw new UnavailableError('the replicas’ key cannot be read right now; retry');
      const header = request.headers[REPLICA_SIGNATURE_HEADER];
      if (!signatureMatches(key, body, Array.isArray(header) ? header[0] : header)) {
        intake.keyMismatch();
        throw new UnauthorizedError('the report is not signed with the replicas’ key', { scheme: 'replica' });
      }
      const report = parseReport(body);
      if (report.replica === intake.identity)
        throw new BadRequestError('a replica does not report to itself');
      if (!intake.isLeader() || report.leader !== intake.identity)
        throw new ConflictError(`the report is for ${report.leader}; ${intake.identity} does not lead`);
      const now = Date.now();
      if (Math.abs(now - report.sentAt) > intake.maxSkewMs)
        throw new BadRequestError(
          `the report was sent ${now - report.sentAt} ms from the leader's clock (at most ${intake.maxSkewMs})`,
        );
      return reply.code(200).send({ applied: intake.record(report, now) === 'applied' });
    },
  );
}
