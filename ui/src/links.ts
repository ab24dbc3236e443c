/**
 * Where a commit can be seen on its git host, derived from the source's URL alone: GitHub and
 * Gitea/Forgejo serve `/commit/{sha}`, GitLab `/-/commit/{sha}`. A URL that names none of them
 * (a local path, an unknown host, SSH) gets no link rather than a guess.
 */

export function commitUrl(sourceUrl: string, sha: string, provider?: string): string | undefined {
  if (!/^[0-9a-f]{7,64}$/.test(sha)) return undefined;
  let url: URL;
  try {
    url = new URL(sourceUrl);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  const path = url.pathname.replace(/\/+$/, '').replace(/\.git$/, '');
  if (!/^\/[^/]+\/[^/]+/.test(path)) return undefined;
  const base = `${url.protocol}//${url.host}${path}`;
  const host = url.hostname.toLowerCase();
  const kind =
    provider ??
    (host === 'github.com'
      ? 'github'
      : host === 'gitlab.com' || host.startsWith('gitlab.')
        ? 'gitlab'
        : undefined);
  if (kind === 'github' || kind === 'gitea') return `${base}/commit/${sha}`;
  if (kind === 'gitlab') return `${base}/-/commit/${sha}`;
  return undefined;
}
