/**
 * The dashboard's only way to sless: the `/v1` API with the user's bearer token (none in no-auth
 * loopback mode), JSON answers, and the two streams the API offers (Server-Sent Events of changes,
 * NDJSON log lines) read through fetch, which, unlike EventSource, can send the token.
 */

export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface Whoami {
  subject: string;
  namespace: string;
  admin: boolean;
  namespaces: string[];
  platform: string;
}

export class Api {
  private token: string | undefined;

  constructor(token: string | undefined) {
    this.token = token;
  }

  get hasToken(): boolean {
    return this.token !== undefined;
  }

  private headers(extra: Record<string, string> = {}): Headers {
    const headers = new Headers(extra);
    if (this.token) headers.set('authorization', `Bearer ${this.token}`);
    return headers;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(path, {
      method,
      headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const message = (parsed as { error?: unknown } | undefined)?.error;
      throw new ApiError(response.status, typeof message === 'string' ? message : `HTTP ${response.status}`);
    }
    return parsed as T;
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** Reads `text/event-stream` until the answer ends or `signal` aborts; each event to `onEvent`. */
  async events(
    path: string,
    onEvent: (event: string, data: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    await this.lines(
      path,
      signal,
      (() => {
        let event = 'message';
        let data = '';
        return (line: string) => {
          if (line === '') {
            if (data) onEvent(event, JSON.parse(data));
            event = 'message';
            data = '';
          } else if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        };
      })(),
    );
  }

  /** Reads NDJSON lines (the log stream) until the answer ends or `signal` aborts. */
  async ndjson(path: string, onItem: (item: unknown) => void, signal: AbortSignal): Promise<void> {
    await this.lines(path, signal, (line) => {
      if (line.trim()) onItem(JSON.parse(line));
    });
  }

  private async lines(path: string, signal: AbortSignal, onLine: (line: string) => void): Promise<void> {
    const response = await fetch(path, { headers: this.headers(), signal });
    if (!response.ok || !response.body) {
      const text = await response.text().catch(() => '');
      let message = `HTTP ${response.status}`;
      try {
        const error = (JSON.parse(text) as { error?: unknown }).error;
        if (typeof error === 'string') message = error;
      } catch {
        // Not JSON: the status says enough.
      }
      throw new ApiError(response.status, message);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += value;
      let end = buffered.indexOf('\n');
      while (end >= 0) {
        onLine(buffered.slice(0, end).replace(/\r$/, ''));
        buffered = buffered.slice(end + 1);
        end = buffered.indexOf('\n');
      }
    }
  }
}
