/**
 * The commit status reporter as both platforms start it: posts go through the outbound-guarded HTTP
 * client the git sources use (a tenant's apiUrl reaches no private address unless the operator
 * allowed it), and the token is the source's secretRef password or token.
 */
import type { HttpClient } from 'isomorphic-git';
import type { Logger } from 'pino';
import type { ObjectStore } from '../core/interfaces.js';
import type { GitSource } from '../core/resources.js';
import type { GitCredentials } from '../source/readers.js';
import { CommitStatusReporter, type StatusSender } from './reporter.js';

/** One POST through an isomorphic-git HTTP client; the answer's body is read and dropped. */
export function senderOver(http: HttpClient): StatusSender {
  return async ({ url, headers, body }) => {
    const bytes = Buffer.from(body);
    async function* chunks(): AsyncIterableIterator<Uint8Array> {
      yield bytes;
    }
    const response = await http.request({
      url,
      method: 'POST',
      headers: { ...headers, 'content-length': String(bytes.length) },
      body: chunks(),
    });
    if (response.body) for await (const _ of response.body) void _;
    return response.statusCode;
  };
}

export function commitStatusReporter(deps: {
  store: ObjectStore;
  http: HttpClient;
  logger: Logger;
  externalUrl?: string;
  credentials(source: GitSource): Promise<GitCredentials | undefined>;
}): CommitStatusReporter {
  return new CommitStatusReporter({
    store: deps.store,
    send: senderOver(deps.http),
    logger: deps.logger.child({ component: 'commit-status' }),
    ...(deps.externalUrl ? { externalUrl: deps.externalUrl } : {}),
    token: async (source) => (await deps.credentials(source))?.password,
  });
}
