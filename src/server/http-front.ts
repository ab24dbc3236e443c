/**
 * The HTTP front every request meets before fastify: /fn/ invocations go straight to the one
 * FunctionProxy (no routing or hooks on the invocation path), requests only the leader can serve are
 * handed to it, and the rest reach the API. It serves on a new server, or on a port bound early
 * (ClientListener) once the API is ready.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { FunctionProxy } from '../proxy/function-proxy.js';
import type { ClientListener } from './early-listener.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface HttpFrontOptions {
  proxy: Pick<FunctionProxy, 'handle'>;
  /** Whether a request is one for the /fn/ proxy. */
  isInvocation(url: string | undefined): boolean;
  /** Replicas with leader election: answers what must go to the leader, and says so; else false. */
  forwardedToLeader?(req: IncomingMessage, res: ServerResponse): boolean;
  /** A port bound before the API was built; without it the front makes its own server. */
  listener?: ClientListener;
}

export class HttpFront {
  private readonly options: HttpFrontOptions;
  private dispatch: Handler | undefined;

  constructor(options: HttpFrontOptions) {
    this.options = options;
  }

  /** fastify's `serverFactory`: the server whose requests the front dispatches, fastify's last. */
  serverFor(api: Handler): Server {
    const { proxy, isInvocation, forwardedToLeader, listener } = this.options;
    const dispatch: Handler = (req, res) => {
      if (isInvocation(req.url)) void proxy.handle(req, res);
      else if (!forwardedToLeader?.(req, res)) api(req, res);
    };
    if (!listener) return createServer(dispatch);
    this.dispatch = dispatch;
    return listener.server;
  }

  /** The API is ready: a port bound early starts handing its requests to the front. */
  apiReady(): void {
    if (this.dispatch) this.options.listener?.attach(this.dispatch);
  }
}
