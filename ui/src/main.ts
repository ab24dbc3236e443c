/**
 * The dashboard: signs in (a token from the page's fragment, a form, or none in no-auth loopback
 * mode), shows one namespace, and keeps it current from the API's change events; actions are the
 * API's own routes, so the server authorizes them exactly as it does for curl.
 */
import { Api, ApiError, type Whoami } from './api.js';
import { h } from './dom.js';
import { type ApiObject, type BuildRecord, COLLECTION, type Kind, NamespaceModel } from './model.js';
import { type Actions, functionCard, jobCard, sourceCard, triggerCard } from './view.js';

const TOKEN_KEY = 'sless-token';
const KINDS: Kind[] = ['GitSource', 'Function', 'Trigger', 'FunctionJob'];
const SECTION: Record<Kind, string> = {
  GitSource: 'sources',
  Function: 'functions',
  Trigger: 'triggers',
  FunctionJob: 'jobs',
};

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

/** A token in the fragment (`#token=…`) is taken once and removed from the address bar and history. */
function takeToken(): string | undefined {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get('token');
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    fragment.delete('token');
    const rest = fragment.toString();
    history.replaceState(null, '', `${location.pathname}${location.search}${rest ? `#${rest}` : ''}`);
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

class Dashboard {
  private api: Api;
  private model: NamespaceModel | undefined;
  private stream: AbortController | undefined;
  private logs: AbortController | undefined;
  private readonly open = new Set<string>();
  private readonly dirty = new Set<Kind>();
  private renderQueued = false;
  private retryMs = 1000;
  /** How many change events arrived: tests read it to see that updates came without a reload. */
  private received = 0;

  constructor() {
    this.api = new Api(takeToken());
  }

  async start(): Promise<void> {
    element<HTMLFormElement>('login').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = element<HTMLInputElement>('token').value.trim();
      if (!token) return;
      sessionStorage.setItem(TOKEN_KEY, token);
      this.api = new Api(token);
      void this.signIn();
    });
    element('sign-out').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.reload();
    });
    element('logs-stop').addEventListener('click', () => this.stopLogs());
    element('logs-clear').addEventListener('click', () => {
      element('logs-out').textContent = '';
    });
    element<HTMLSelectElement>('ns').addEventListener('change', (event) =>
      this.show((event.target as HTMLSelectElement).value),
    );
    // Relative times ("12s ago") are read again from the same objects; nothing is fetched for it.
    setInterval(() => {
      for (const kind of KINDS) this.dirty.add(kind);
      this.render();
    }, 30_000);
    await this.signIn();
  }

  private async signIn(): Promise<void> {
    let me: Whoami;
    try {
      me = await this.api.get<Whoami>('/v1/whoami');
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        if (this.api.hasToken) this.notice(`Sign-in failed: ${error.message}`);
        this.live('signed out');
        element('login').hidden = false;
        element<HTMLInputElement>('token').focus();
        return;
      }
      this.notice(`Cannot reach sless: ${(error as Error).message}`);
      return;
    }
    element('login').hidden = true;
    element('sign-out').hidden = !this.api.hasToken;
    element('who').textContent = me.admin
      ? `${me.subject} (admin, ${me.platform})`
      : `${me.subject} · namespace ${me.namespace}`;
    const select = element<HTMLSelectElement>('ns');
    select.replaceChildren(...me.namespaces.map((ns) => h('option', { value: ns }, ns)));
    element('ns-picker').hidden = me.namespaces.length < 2;
    const wanted = new URLSearchParams(location.hash.slice(1)).get('ns');
    const first = wanted && me.namespaces.includes(wanted) ? wanted : me.namespace;
    select.value = first;
    await this.show(first);
  }

  private async show(namespace: string): Promise<void> {
    this.stream?.abort();
    this.stopLogs();
    this.model = new NamespaceModel(namespace);
    for (const kind of KINDS) this.dirty.add(kind);
    this.render();
    this.connect(this.model);
  }

  /** The event stream first, the lists once it is live: nothing changes unseen in between. */
  private connect(model: NamespaceModel): void {
    const controller = new AbortController();
    this.stream = controller;
    const base = `/v1/namespaces/${encodeURIComponent(model.namespace)}`;
    this.live('connecting…');
    this.api
      .events(
        `${base}/events`,
        (event, data) => {
          if (event === 'hello') {
            this.retryMs = 1000;
            void this.loadAll(model).then(() => this.live('live'));
          } else if (event === 'change') this.onChange(model, data as ChangeEvent);
          else if (event === 'build') void this.loadBuilds(model, (data as { name: string }).name);
        },
        controller.signal,
      )
      .then(
        () => this.reconnect(model, controller, 'the event stream ended'),
        (error: unknown) => this.reconnect(model, controller, (error as Error).message),
      );
  }

  private reconnect(model: NamespaceModel, controller: AbortController, why: string): void {
    if (controller.signal.aborted || this.model !== model) return;
    const wait = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, 15_000);
    this.live(`reconnecting in ${Math.round(wait / 1000)} s (${why})`);
    setTimeout(() => {
      if (this.model === model && !controller.signal.aborted) this.connect(model);
    }, wait);
  }

  private async loadAll(model: NamespaceModel): Promise<void> {
    const base = `/v1/namespaces/${encodeURIComponent(model.namespace)}`;
    try {
      const lists = await Promise.all(
        KINDS.map((kind) => this.api.get<{ items: ApiObject[] }>(`${base}/${COLLECTION[kind]}`)),
      );
      if (this.model !== model) return;
      for (const [index, kind] of KINDS.entries()) {
        model.objects[kind].clear();
        for (const object of lists[index]?.items ?? []) model.put(object);
        this.dirty.add(kind);
      }
      this.render();
      await Promise.all(model.sorted('Function').map((fn) => this.loadBuilds(model, fn.metadata.name)));
    } catch (error) {
      this.notice(`Cannot read namespace ${model.namespace}: ${(error as Error).message}`);
    }
  }

  private onChange(model: NamespaceModel, change: ChangeEvent): void {
    this.received += 1;
    document.body.dataset.changes = String(this.received);
    if (change.type === 'DELETED') model.remove(change.kind, change.name);
    else {
      const before = model.objects[change.kind]?.get(change.name);
      model.put(change.object);
      const lastBuild = (o: ApiObject | undefined) => JSON.stringify(o?.status?.lastBuild ?? null);
      if (change.kind === 'Function' && lastBuild(before) !== lastBuild(change.object))
        void this.loadBuilds(model, change.name);
    }
    this.dirty.add(change.kind);
    // Function cards link commits through their source's URL.
    if (change.kind === 'GitSource') this.dirty.add('Function');
    this.render();
  }

  private async loadBuilds(model: NamespaceModel, name: string): Promise<void> {
    const path = `/v1/namespaces/${encodeURIComponent(model.namespace)}/functions/${encodeURIComponent(name)}/builds?tail=40`;
    try {
      const { items } = await this.api.get<{ items: BuildRecord[] }>(path);
      if (this.model !== model) return;
      model.builds.set(name, items);
      this.dirty.add('Function');
      this.render();
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) this.notice((error as Error).message);
    }
  }

  /** Coalesces renders to one per frame; each dirty kind's list is rebuilt, focus kept where it was. */
  private render(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    queueMicrotask(() => {
      this.renderQueued = false;
      const model = this.model;
      if (!model) return;
      for (const kind of [...this.dirty]) {
        this.dirty.delete(kind);
        this.renderKind(model, kind);
      }
    });
  }

  private renderKind(model: NamespaceModel, kind: Kind): void {
    const list = document.querySelector<HTMLElement>(`[data-list="${kind}"]`);
    if (!list) return;
    const focus = focusKey();
    const objects = model.sorted(kind);
    const actions = this.actions(model);
    const cards = objects.map((object) => {
      if (kind === 'GitSource') return sourceCard(object, actions);
      if (kind === 'Function') return functionCard(object, model, actions, this.open);
      if (kind === 'Trigger') return triggerCard(object);
      return jobCard(object);
    });
    list.replaceChildren(...cards);
    element(SECTION[kind]).hidden = kind !== 'GitSource' && kind !== 'Function' && objects.length === 0;
    if (kind === 'GitSource' && objects.length === 0)
      list.replaceChildren(h('p', { class: 'muted' }, `No sources in namespace ${model.namespace} yet.`));
    if (kind === 'GitSource' || kind === 'Function') element(SECTION[kind]).hidden = false;
    restoreFocus(focus);
  }

  private actions(model: NamespaceModel): Actions {
    const base = `/v1/namespaces/${encodeURIComponent(model.namespace)}`;
    const run = async (what: string, call: () => Promise<unknown>) => {
      this.notice(`${what}…`, 'info');
      try {
        const answer = (await call()) as { outcome?: string; message?: string } | undefined;
        const detail = answer?.outcome
          ? `: ${answer.outcome}${answer.message ? ` (${answer.message})` : ''}`
          : '';
        this.notice(`${what} done${detail}`, 'info');
      } catch (error) {
        this.notice(`${what} failed: ${(error as Error).message}`);
      }
    };
    const source = (name: string) => `${base}/sources/${encodeURIComponent(name)}`;
    return {
      sync: (name) => void run(`Sync of ${name}`, () => this.api.request('POST', `${source(name)}/sync`)),
      setSuspended: (object, suspend) =>
        void run(`${suspend ? 'Suspending' : 'Resuming'} ${object.metadata.name}`, () =>
          this.api.request('POST', `${base}/sources`, {
            apiVersion: 'sless.dev/v1alpha1',
            kind: 'GitSource',
            metadata: { name: object.metadata.name },
            spec: { ...object.spec, suspend },
          }),
        ),
      pin: (name, commit) =>
        void run(`Pinning ${name} to ${commit.slice(0, 12)}`, () =>
          this.api.request('POST', `${source(name)}/pin`, { commit }),
        ),
      unpin: (name) => void run(`Unpinning ${name}`, () => this.api.request('DELETE', `${source(name)}/pin`)),
      rebuild: (name) =>
        void run(`Rebuild of ${name}`, () =>
          this.api.request('POST', `${base}/functions/${encodeURIComponent(name)}/rebuild`),
        ),
      followLogs: (name) => this.followLogs(model, name),
    };
  }

  private followLogs(model: NamespaceModel, name: string): void {
    this.stopLogs();
    const controller = new AbortController();
    this.logs = controller;
    const out = element('logs-out');
    out.textContent = '';
    element('logs-fn').textContent = `of ${name} (following)`;
    element('logs').hidden = false;
    element('logs').scrollIntoView({ block: 'nearest' });
    const path = `/v1/namespaces/${encodeURIComponent(model.namespace)}/functions/${encodeURIComponent(name)}/logs?tail=100&follow=true`;
    this.api
      .ndjson(
        path,
        (item) => {
          const line = item as {
            time?: string;
            instance?: string;
            stream?: string;
            line?: string;
            error?: string;
          };
          const text = line.error
            ? `! ${line.error}`
            : `${line.time ?? ''} ${line.instance ?? ''} ${line.stream ?? ''} ${line.line ?? ''}`;
          const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
          out.append(h('div', { class: line.stream === 'stderr' ? 'stderr' : '' }, text));
          // The view holds the last 2000 lines.
          while (out.childElementCount > 2000) out.firstElementChild?.remove();
          if (atBottom) out.scrollTop = out.scrollHeight;
        },
        controller.signal,
      )
      .then(
        () => {
          if (this.logs === controller) element('logs-fn').textContent = `of ${name} (ended)`;
        },
        (error: unknown) => {
          if (!controller.signal.aborted)
            element('logs-fn').textContent = `of ${name} (${(error as Error).message})`;
        },
      );
  }

  private stopLogs(): void {
    if (!this.logs) return;
    this.logs.abort();
    this.logs = undefined;
    const label = element('logs-fn');
    label.textContent = label.textContent?.replace('(following)', '(stopped)') ?? '';
  }

  private live(state: string): void {
    element('live').textContent = state;
    document.body.dataset.live = state === 'live' ? 'true' : 'false';
  }

  private notice(message: string, tone: 'error' | 'info' = 'error'): void {
    const box = element('notice');
    box.className = tone;
    box.textContent = message;
  }
}

interface ChangeEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: Kind;
  name: string;
  object: ApiObject;
}

/** Which control had focus, by its card and its action, so a re-render can give it back. */
function focusKey(): string | undefined {
  const active = document.activeElement as HTMLElement | null;
  const card = active?.closest<HTMLElement>('[data-kind]');
  if (!active || !card) return undefined;
  const control =
    active.dataset.action ??
    (active.tagName === 'SUMMARY' ? `summary:${active.parentElement?.dataset.details}` : undefined);
  if (!control) return undefined;
  return `[data-kind="${card.dataset.kind}"][data-name="${card.dataset.name}"]|${control}|${active.dataset.commit ?? ''}`;
}

function restoreFocus(key: string | undefined): void {
  if (!key) return;
  const [card, control, commit] = key.split('|');
  const scope = card ? document.querySelector<HTMLElement>(card) : null;
  if (!scope || !control) return;
  const target = control.startsWith('summary:')
    ? scope.querySelector<HTMLElement>(`[data-details="${control.slice(8)}"] > summary`)
    : scope.querySelector<HTMLElement>(
        `[data-action="${control}"]${commit ? `[data-commit="${commit}"]` : ''}`,
      );
  target?.focus();
}

void new Dashboard().start();
