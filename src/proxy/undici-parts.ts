/**
 * The parts of undici the /fn/ proxy uses, loaded without undici's index (fetch, WebSocket, caches,
 * mocks, proxies), which takes about twice as long to load. The proxy is on the serving path of a
 * restart, where every restored function waits for it; the index loads later, with the control plane.
 * These are the very classes the index exports (the same modules in Node's cache).
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool;
export type Pool = Undici.Pool;
export const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export type Agent = Undici.Agent;
export const errors = require('undici/lib/core/errors.js') as typeof Undici.errors;
