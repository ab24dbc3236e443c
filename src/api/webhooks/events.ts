/**
 * What a verified webhook asks for: a push to the source's branch means "sync now"; anything else
 * is acknowledged and ignored. Providers are told apart by their event header.
 */

type Headers = Record<string, string | string[] | undefined>;

export type Provider = 'github' | 'gitea' | 'gitlab' | 'generic';

export interface WebhookEvent {
  provider: Provider;
  /** The provider's event name, e.g. `push`, `ping`, `Push Hook`. */
  event: string;
  deliveryId: string | undefined;
}

export type Decision = { sync: true; ref: string | undefined } | { sync: false; reason: string };

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function describeEvent(headers: Headers): WebhookEvent {
  // Gitea also sends X-GitHub-Event for compatibility, so it is recognised first.
  const gitea = header(headers, 'x-gitea-event');
  if (gitea !== undefined)
    return { provider: 'gitea', event: gitea, deliveryId: header(headers, 'x-gitea-delivery') };
  const github = header(headers, 'x-github-event');
  if (github !== undefined)
    return { provider: 'github', event: github, deliveryId: header(headers, 'x-github-delivery') };
  const gitlab = header(headers, 'x-gitlab-event');
  if (gitlab !== undefined)
    return { provider: 'gitlab', event: gitlab, deliveryId: header(headers, 'x-gitlab-event-uuid') };
  return {
    provider: 'generic',
    event: header(headers, 'x-sless-event') ?? 'push',
    deliveryId: header(headers, 'x-sless-delivery'),
  };
}

const PUSH_EVENTS: Record<Provider, string> = {
  github: 'push',
  gitea: 'push',
  gitlab: 'Push Hook',
  generic: 'push',
};

/**
 * Decides from the event and its parsed payload. `payload` is undefined when the body was not JSON;
 * for a push that is a client error the caller reports.
 */
export function decide(event: WebhookEvent, payload: unknown, branch: string): Decision {
  if (event.event !== PUSH_EVENTS[event.provider])
    return { sync: false, reason: `event "${event.event}" is not a push` };
  const ref =
    payload !== null && typeof payload === 'object' && !Array.isArray(payload)
      ? (payload as Record<string, unknown>).ref
      : undefined;
  // A generic sender may just say "look now", without a ref.
  if (ref === undefined && event.provider === 'generic') return { sync: true, ref: undefined };
  if (typeof ref !== 'string') return { sync: false, reason: 'push payload has no ref' };
  if (ref !== `refs/heads/${branch}`)
    return { sync: false, reason: `ref ${ref} is not the source's branch ${branch}` };
  return { sync: true, ref };
}

/** The JSON payload of a body: raw JSON, or GitHub's form encoding (`payload=<json>`). */
export function parsePayload(body: Buffer, contentType: string | undefined): unknown {
  let text = body.toString('utf8');
  if (contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded'))
    text = new URLSearchParams(text).get('payload') ?? '';
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
