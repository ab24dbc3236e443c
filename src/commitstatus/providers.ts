/**
 * The status APIs of the git hosts, as the one request each takes: GitHub's and Gitea's
 * `POST /repos/{owner}/{repo}/statuses/{sha}`, GitLab's `POST /projects/{path}/statuses/{sha}`. The API
 * base is derived from the source's URL (api.github.com for github.com, `/api/v3` on GitHub
 * Enterprise, `/api/v4` and `/api/v1` on the host for GitLab and Gitea) unless `apiUrl` names it.
 */
import type { CommitReport } from './decide.js';

export type Provider = 'github' | 'gitlab' | 'gitea';

export interface CommitStatusSpec {
  provider: Provider;
  /** The API base, when it is not where the source's URL implies. */
  apiUrl?: string;
  /** The status's name on the commit (GitHub and Gitea `context`, GitLab `name`). */
  context?: string;
}

export interface StatusRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export class CommitStatusSpecError extends Error {}

/** `owner/repo` (or GitLab's `group/sub/project`) and the host's origin, from the source's URL. */
export function repositoryOf(sourceUrl: string): { origin: string; path: string } {
  let url: URL;
  try {
    url = new URL(sourceUrl);
  } catch {
    throw new CommitStatusSpecError(
      `spec.url: ${sourceUrl} is not an http(s) URL a status can be posted for`,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new CommitStatusSpecError('spec.url: commit statuses need an http(s) repository URL');
  const path = url.pathname.replace(/^\/+|\/+$/g, '').replace(/\.git$/, '');
  if (path.split('/').length < 2)
    throw new CommitStatusSpecError(`spec.url: no owner/repository in ${url.pathname}`);
  return { origin: url.origin, path };
}

export function statusRequest(
  spec: CommitStatusSpec,
  sourceUrl: string,
  report: CommitReport,
  token: string,
): StatusRequest {
  const { origin, path } = repositoryOf(sourceUrl);
  const context = spec.context ?? 'sless';
  const json = { 'content-type': 'application/json', 'user-agent': 'sless' };
  const base = spec.apiUrl?.replace(/\/+$/, '');
  const sha = encodeURIComponent(report.commit);
  if (spec.provider === 'gitlab') {
    const api = base ?? `${origin}/api/v4`;
    return {
      url: `${api}/projects/${encodeURIComponent(path)}/statuses/${sha}`,
      headers: { ...json, 'private-token': token },
      body: JSON.stringify({
        state: report.state === 'failure' ? 'failed' : report.state === 'pending' ? 'running' : 'success',
        name: context,
        description: report.description,
        ...(report.targetUrl ? { target_url: report.targetUrl } : {}),
      }),
    };
  }
  const [owner, repo] = path.split('/').slice(-2) as [string, string];
  const api =
    base ??
    (spec.provider === 'gitea'
      ? `${origin}${new URL(sourceUrl).pathname.replace(/\/[^/]+\/[^/]+\/?$/, '')}/api/v1`
      : origin === 'https://github.com'
        ? 'https://api.github.com'
        : `${origin}/api/v3`);
  return {
    url: `${api}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/statuses/${sha}`,
    headers: {
      ...json,
      ...(spec.provider === 'gitea'
        ? { authorization: `token ${token}`, accept: 'application/json' }
        : {
            authorization: `Bearer ${token}`,
            accept: 'application/vnd.github+json',
            'x-github-api-version': '2022-11-28',
          }),
    },
    body: JSON.stringify({
      state: report.state,
      context,
      description: report.description,
      ...(report.targetUrl ? { target_url: report.targetUrl } : {}),
    }),
  };
}
