/**
 * One card per object: what a person needs to see of a source, a function, a trigger or a job, and
 * the buttons that act on it. Every figure is read from the object (or build record) the API gave;
 * each carries `data-field` so that tests can hold the page to the API's answers.
 */
import { type Child, h } from './dom.js';
import { ago, duration, short } from './format.js';
import { commitUrl } from './links.js';
import { type ApiObject, type BuildRecord, condition, type NamespaceModel, text } from './model.js';

export interface Actions {
  sync(source: string): void;
  setSuspended(source: ApiObject, suspend: boolean): void;
  pin(source: string, commit: string): void;
  unpin(source: string): void;
  rebuild(fn: string): void;
  followLogs(fn: string): void;
}

const SOURCE_LABEL = 'sless.dev/source';

function field(name: string, label: string, value: Child, title?: string): HTMLElement {
  return h(
    'div',
    { class: 'field' },
    h('dt', {}, label),
    h('dd', { 'data-field': name, title }, value ?? '—'),
  );
}

function badge(status: string | undefined, reason: string | undefined): HTMLElement {
  const tone = status === 'True' ? 'ok' : status === 'False' ? 'bad' : 'wait';
  return h(
    'span',
    { class: `badge ${tone}`, 'data-field': 'ready' },
    status === 'True' ? 'Ready' : status === 'False' ? 'Not ready' : 'Pending',
    reason ? ` · ${reason}` : '',
  );
}

function phaseBadge(phase: string | undefined): HTMLElement {
  const tone =
    phase === 'Ready' || phase === 'ScaledToZero' || phase === 'Succeeded'
      ? 'ok'
      : phase === 'Failed'
        ? 'bad'
        : 'wait';
  return h('span', { class: `badge ${tone}`, 'data-field': 'phase' }, phase ?? 'Pending');
}

function commitLink(source: ApiObject | undefined, sha: string | undefined): Child {
  if (!sha) return '—';
  const provider = text((source?.spec.commitStatus as { provider?: unknown } | undefined)?.provider);
  const href = source ? commitUrl(String(source.spec.url ?? ''), sha, provider) : undefined;
  const label = h('code', {}, short(sha));
  return href
    ? h('a', { href, rel: 'noreferrer', target: '_blank', title: sha }, label)
    : h('span', { title: sha }, label);
}

function conditions(object: ApiObject): HTMLElement {
  const list = object.status?.conditions ?? [];
  return h(
    'ul',
    { class: 'conditions', 'data-field': 'conditions' },
    list.map((c) =>
      h(
        'li',
        { 'data-condition': c.type },
        h('strong', {}, c.type),
        ` ${c.status}`,
        c.reason ? ` (${c.reason})` : '',
        c.message ? h('div', { class: 'message' }, c.message) : '',
      ),
    ),
  );
}

export function sourceCard(source: ApiObject, actions: Actions): HTMLElement {
  const name = source.metadata.name;
  const status = source.status ?? {};
  const ready = condition(source, 'Ready');
  const suspended = source.spec.suspend === true;
  const pinned = text((source.spec.ref as { commit?: unknown } | undefined)?.commit);
  return h(
    'article',
    { class: 'card', 'data-kind': 'GitSource', 'data-name': name },
    h(
      'header',
      {},
      h('h3', {}, name),
      badge(ready?.status, ready?.reason),
      suspended ? h('span', { class: 'badge wait', 'data-field': 'suspended' }, 'Suspended') : '',
    ),
    ready?.message ? h('p', { class: 'message', 'data-field': 'readyMessage' }, ready.message) : '',
    h(
      'dl',
      {},
      field('url', 'URL', String(source.spec.url ?? '')),
      field('branch', 'Branch', String(source.spec.branch ?? 'main')),
      field('head', 'Synced commit', commitLink(source, text(status.lastSyncedCommit))),
      field('headMessage', 'Message', text(status.lastSyncedMessage) ?? '—'),
      field('lastSync', 'Last sync', ago(text(status.lastSyncTime)), text(status.lastSyncTime)),
      pinned ? field('pinned', 'Pinned to', commitLink(source, pinned)) : '',
    ),
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', 'data-action': 'sync', onclick: () => actions.sync(name) }, 'Sync now'),
      h(
        'button',
        {
          type: 'button',
          'data-action': suspended ? 'resume' : 'suspend',
          onclick: () => actions.setSuspended(source, !suspended),
        },
        suspended ? 'Resume' : 'Suspend',
      ),
      pinned
        ? h(
            'button',
            { type: 'button', 'data-action': 'unpin', onclick: () => actions.unpin(name) },
            'Unpin (follow the branch)',
          )
        : '',
    ),
  );
}

function buildRow(
  build: BuildRecord,
  source: string | undefined,
  servingCommit: string | undefined,
  actions: Actions,
): HTMLElement {
  return h(
    'tr',
    { 'data-commit': build.commit },
    h(
      'td',
      {},
      h('code', { title: build.commit }, short(build.commit)),
      build.commit === servingCommit ? ' (serving)' : '',
    ),
    h(
      'td',
      {},
      h(
        'span',
        {
          class: `badge ${build.result === 'Succeeded' ? 'ok' : build.result === 'Failed' ? 'bad' : 'wait'}`,
        },
        build.result,
      ),
    ),
    h('td', { title: build.startedAt }, ago(build.startedAt)),
    h('td', {}, duration(build.durationMs)),
    h(
      'td',
      {},
      source && build.result === 'Succeeded'
        ? h(
            'button',
            {
              type: 'button',
              'data-action': 'pin',
              'data-commit': build.commit,
              'aria-label': `Pin source ${source} to ${short(build.commit)}`,
              onclick: () => actions.pin(source, build.commit),
            },
            'Pin',
          )
        : '',
    ),
  );
}

export function functionCard(
  fn: ApiObject,
  model: NamespaceModel,
  actions: Actions,
  open: Set<string>,
): HTMLElement {
  const name = fn.metadata.name;
  const status = fn.status ?? {};
  const sourceName = fn.metadata.labels?.[SOURCE_LABEL];
  const source = sourceName ? model.objects.GitSource.get(sourceName) : undefined;
  const last = status.lastBuild as BuildRecord | undefined;
  const url = text(status.url);
  const instances = status.instances as { desired: number; ready: number } | undefined;
  const builds = model.builds.get(name) ?? [];
  const details = (key: string, summary: string, ...body: Child[]) => {
    const id = `${name}/${key}`;
    const element = h(
      'details',
      { open: open.has(id), 'data-details': key },
      h('summary', {}, summary),
      ...body,
    );
    element.addEventListener('toggle', () =>
      (element as HTMLDetailsElement).open ? open.add(id) : open.delete(id),
    );
    return element;
  };
  return h(
    'article',
    { class: 'card', 'data-kind': 'Function', 'data-name': name },
    h(
      'header',
      {},
      h('h3', {}, name),
      phaseBadge(status.phase),
      h('span', { class: 'muted' }, String(fn.spec.runtime ?? '')),
    ),
    text(status.lastError)
      ? h('p', { class: 'message bad-text', 'data-field': 'lastError' }, String(status.lastError))
      : '',
    h(
      'dl',
      {},
      field('commit', 'Commit', commitLink(source, text(status.commit))),
      field('servingCommit', 'Serving build of', commitLink(source, text(status.servingCommit))),
      field('url', 'URL', url ? h('a', { href: url }, url) : '—'),
      field(
        'instances',
        'Instances',
        status.phase === 'ScaledToZero' ? '0 (scaled to zero)' : instancesText(instances),
      ),
      field('lastBuild', 'Last build', last ? `${last.result} at ${short(last.commit)}` : '—'),
      field('lastBuildDuration', 'Build took', duration(last?.durationMs)),
    ),
    h(
      'div',
      { class: 'row' },
      h(
        'button',
        { type: 'button', 'data-action': 'rebuild', onclick: () => actions.rebuild(name) },
        'Rebuild',
      ),
      h(
        'button',
        { type: 'button', 'data-action': 'logs', onclick: () => actions.followLogs(name) },
        'Follow logs',
      ),
    ),
    details('conditions', 'Conditions', conditions(fn)),
    last?.logTail
      ? details('log', 'Last build log', h('pre', { class: 'log', 'data-field': 'buildLog' }, last.logTail))
      : '',
    details(
      'history',
      `Build history (${builds.length})`,
      h(
        'table',
        { 'data-field': 'history' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'Commit'),
            h('th', {}, 'Result'),
            h('th', {}, 'Started'),
            h('th', {}, 'Took'),
            h('th', {}, h('span', { class: 'sr-only' }, 'Actions')),
          ),
        ),
        h(
          'tbody',
          {},
          builds.map((b) => buildRow(b, sourceName, text(status.servingCommit), actions)),
        ),
      ),
    ),
  );
}

export function triggerCard(trigger: ApiObject): HTMLElement {
  const status = trigger.status ?? {};
  const ready = condition(trigger, 'Ready');
  return h(
    'article',
    { class: 'card small', 'data-kind': 'Trigger', 'data-name': trigger.metadata.name },
    h('header', {}, h('h3', {}, trigger.metadata.name), phaseBadge(status.phase)),
    ready?.message ? h('p', { class: 'message' }, ready.message) : '',
    h(
      'dl',
      {},
      field('type', 'Type', String(trigger.spec.type ?? '')),
      field('function', 'Function', String(trigger.spec.function ?? '')),
      trigger.spec.schedule
        ? field('schedule', 'Schedule', h('code', {}, String(trigger.spec.schedule)))
        : '',
      field('lastRun', 'Last run', ago(text(status.lastRun)), text(status.lastRun)),
      field('nextRun', 'Next run', ago(text(status.nextRun)), text(status.nextRun)),
      field('lastResult', 'Last result', text(status.lastResult) ?? '—'),
    ),
  );
}

export function jobCard(job: ApiObject): HTMLElement {
  const status = job.status ?? {};
  const result = status.result === undefined ? undefined : JSON.stringify(status.result);
  return h(
    'article',
    { class: 'card small', 'data-kind': 'FunctionJob', 'data-name': job.metadata.name },
    h('header', {}, h('h3', {}, job.metadata.name), phaseBadge(status.phase)),
    h(
      'dl',
      {},
      field('function', 'Function', String(job.spec.function ?? '')),
      field('runId', 'Run', String(job.spec.runId ?? '')),
      field('completed', 'Completed', ago(text(status.completionTime)), text(status.completionTime)),
      field('exitCode', 'Exit code', typeof status.exitCode === 'number' ? status.exitCode : '—'),
      field(
        'result',
        'Result',
        result
          ? h('code', {}, result.length > 300 ? `${result.slice(0, 299)}…` : result)
          : (text(status.message) ?? '—'),
      ),
    ),
  );
}

/** What the platform observed runs: `3`, or `2 of 3` while some are not ready yet. */
export function instancesText(instances: { desired: number; ready: number } | undefined): string {
  if (!instances) return '—';
  return instances.ready === instances.desired
    ? String(instances.ready)
    : `${instances.ready} of ${instances.desired}`;
}
