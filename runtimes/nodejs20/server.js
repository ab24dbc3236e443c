// sless Node.js 20 runtime: one HTTP server per function, stdlib only (copied into every function build).
// Contract: see runtimes/README.md.

import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const MAX_BODY = 32 * 1024 * 1024;
const EXIT_ENTRYPOINT = 3;

const env = process.env;
const entrypoint = env.SLESS_ENTRYPOINT || 'handler.handle';
const codeDir = path.resolve(env.SLESS_CODE_DIR || process.cwd());
const functionName = env.SLESS_FUNCTION_NAME || '';
const namespace = env.SLESS_NAMESPACE || '';
const timeoutSec = positiveNumber(env.SLESS_TIMEOUT_SEC, 30);
const timeoutMs = Math.round(timeoutSec * 1000);
const port = Number.parseInt(env.PORT || '8080', 10);

function positiveNumber(raw, fallback) {
  const n = Number(raw);
  return raw !== undefined && raw !== '' && Number.isFinite(n) && n > 0 ? n : fallback;
}

function fatal(message, err) {
  if (err?.stack) process.stderr.write(`${err.stack}\n`);
  process.stderr.write(`sless-runtime: cannot load entrypoint "${entrypoint}": ${message}\n`);
  process.exit(EXIT_ENTRYPOINT);
}

function isFile(p) {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

async function loadHandler() {
  const dot = entrypoint.lastIndexOf('.');
  if (dot <= 0 || dot === entrypoint.length - 1) {
    fatal('SLESS_ENTRYPOINT must look like "module.function" (e.g. "handler.handle" or "lib/api.handle")');
  }
  const moduleName = entrypoint.slice(0, dot);
  const fnName = entrypoint.slice(dot + 1);
  const base = path.resolve(codeDir, moduleName);
  const candidates = [`${base}.js`, `${base}.mjs`, `${base}.cjs`, path.join(base, 'index.js'), base];
  const file = candidates.find(isFile);
  if (!file) fatal(`module "${moduleName}" not found in ${codeDir}`);
  let mod;
  try {
    mod = await import(pathToFileURL(file).href);
  } catch (err) {
    fatal(`module "${moduleName}" failed to load: ${oneLine(err)}`, err);
  }
  // ESM named export, or a CommonJS export that the named-export detection did not see. Own
  // properties only: "handler.constructor" or "handler.__proto__" are not the module's functions.
  const own = (object, key) => (Object.hasOwn(object, key) ? object[key] : undefined);
  let fn = own(mod, fnName);
  const def = mod.default;
  if (typeof fn !== 'function' && def != null && (typeof def === 'object' || typeof def === 'function')) {
    fn = own(def, fnName);
  }
  if (typeof fn !== 'function' && fnName === 'default' && typeof mod.default === 'function') fn = mod.default;
  if (typeof fn !== 'function') fatal(`module "${moduleName}" has no function "${fnName}"`);
  // WebSockets: the module's own `upgrade` export, if any, takes the connections that ask to switch.
  let upgrade = own(mod, 'upgrade');
  if (typeof upgrade !== 'function' && def != null && (typeof def === 'object' || typeof def === 'function'))
    upgrade = own(def, 'upgrade');
  return { handler: fn, upgrade: typeof upgrade === 'function' ? upgrade : undefined };
}

function oneLine(err) {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.split('\n')[0];
}

function errorMessage(err) {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

// --- request -> event -------------------------------------------------------------------------------

function mediaType(contentType) {
  if (!contentType) return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

function isJsonType(mt) {
  return mt === 'application/json' || mt.endsWith('+json');
}

function isTextType(mt) {
  return (
    mt === '' ||
    mt.startsWith('text/') ||
    mt === 'application/x-www-form-urlencoded' ||
    mt === 'application/xml' ||
    mt.endsWith('+xml') ||
    mt === 'application/javascript' ||
    mt === 'application/graphql'
  );
}

/** Returns [body, isBase64Encoded]. */
function decodeBody(buf, contentType) {
  if (buf.length === 0) return [null, false];
  const mt = mediaType(contentType);
  if (isJsonType(mt) || isTextType(mt)) {
    if (isUtf8(buf)) {
      const text = buf.toString('utf8');
      if (isJsonType(mt)) {
        try {
          return [JSON.parse(text), false];
        } catch {
          // invalid JSON: hand it over as text
        }
      }
      return [text, false];
    }
  }
  return [buf.toString('base64'), true];
}

function parseQuery(search) {
  const query = {};
  if (!search) return query;
  for (const [k, v] of new URLSearchParams(search)) {
    const prev = query[k];
    if (prev === undefined) query[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else query[k] = [prev, v];
  }
  return query;
}

function makeContext(headers) {
  const rid = headers['x-request-id'];
  return {
    functionName,
    namespace,
    requestId: typeof rid === 'string' && rid !== '' ? rid : randomUUID(),
    deadlineMs: Date.now() + timeoutMs,
  };
}

// --- result -> response -----------------------------------------------------------------------------

const JSON_TYPE = 'application/json';

/** Returns { statusCode, headers, payload: Buffer|string, jsonBody } where jsonBody is for one-shot output. */
function mapResult(result) {
  if (result !== null && typeof result === 'object' && typeof result.statusCode === 'number') {
    const statusCode = result.statusCode;
    const headers = {};
    let hasType = false;
    if (result.headers && typeof result.headers === 'object') {
      for (const [k, v] of Object.entries(result.headers)) {
        if (v === undefined || v === null) continue;
        const lower = k.toLowerCase();
        // Framing is the runtime's job: the body length is computed below.
        if (lower === 'content-length' || lower === 'transfer-encoding') continue;
        headers[k] = Array.isArray(v) ? v.map(String) : String(v);
        if (lower === 'content-type') hasType = true;
      }
    }
    const body = result.body;
    let payload = '';
    let oneShotBody = null;
    if (isStreamBody(body)) {
      if (!hasType) headers['content-type'] = 'application/octet-stream';
      return { statusCode, headers, payload, oneShotBody, stream: body };
    }
    if (body === undefined || body === null) {
      payload = '';
    } else if (result.isBase64Encoded === true && typeof body === 'string') {
      payload = Buffer.from(body, 'base64');
      oneShotBody = body;
      if (!hasType) headers['content-type'] = 'application/octet-stream';
    } else if (typeof body === 'string') {
      payload = body;
      oneShotBody = body;
      if (!hasType) headers['content-type'] = 'text/plain; charset=utf-8';
    } else if (Buffer.isBuffer(body) || body instanceof Uint8Array) {
      payload = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      oneShotBody = payload.toString('base64');
      if (!hasType) headers['content-type'] = 'application/octet-stream';
    } else {
      payload = JSON.stringify(body);
      oneShotBody = body;
      if (!hasType) headers['content-type'] = JSON_TYPE;
    }
    return { statusCode, headers, payload, oneShotBody };
  }
  if (isStreamBody(result)) {
    return {
      statusCode: 200,
      headers: { 'content-type': 'application/octet-stream' },
      payload: '',
      oneShotBody: null,
      stream: result,
    };
  }
  const json = JSON.stringify(result === undefined ? null : result);
  return {
    statusCode: 200,
    headers: { 'content-type': JSON_TYPE },
    payload: json === undefined ? 'null' : json,
    oneShotBody: result === undefined ? null : result,
  };
}

// --- streamed bodies --------------------------------------------------------------------------------

/**
 * A body that is produced while it is sent: an async iterable (async generator, Node Readable, web
 * ReadableStream), a web stream without async iteration, or a sync generator. Arrays and other
 * iterables stay JSON values, as before.
 */
function isStreamBody(body) {
  if (body === null || typeof body !== 'object') return false;
  if (typeof body[Symbol.asyncIterator] === 'function') return true;
  if (typeof body.getReader === 'function') return true;
  return typeof body.next === 'function' && typeof body[Symbol.iterator] === 'function';
}

function iteratorOf(body) {
  if (typeof body[Symbol.asyncIterator] === 'function') return body[Symbol.asyncIterator]();
  if (typeof body.getReader === 'function') {
    const reader = body.getReader();
    return {
      next: () => reader.read(),
      return: async () => {
        await reader.cancel();
        return { done: true, value: undefined };
      },
    };
  }
  return body[Symbol.iterator]();
}

/** A chunk as bytes: strings are UTF-8; Buffers and typed arrays go as they are. */
function chunkBytes(value) {
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`a streamed chunk must be a string, Buffer or Uint8Array, not ${typeof value}`);
}

/** Resolves when the response can take more (true) or has closed (false). */
function drained(res) {
  return new Promise((resolve) => {
    const done = (more) => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(more);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}

/**
 * Sends a streamed body: the headers at once, then each chunk as the handler produces it, read no
 * faster than the client takes them. A client that leaves aborts context.signal and ends the
 * iterator (an async generator runs its finally blocks); a failing handler cuts the response, the
 * only honest answer once a status has gone out.
 */
async function streamOut(res, mapped, context) {
  const iterator = iteratorOf(mapped.stream);
  const signal = context.signal;
  let ended = false;
  const stop = () => {
    if (ended) return;
    ended = true;
    Promise.resolve()
      .then(() => iterator.return?.())
      .catch(() => {});
  };
  signal.addEventListener('abort', stop, { once: true });
  try {
    res.writeHead(mapped.statusCode, mapped.headers);
    res.flushHeaders();
    if (res.req?.method === 'HEAD') {
      stop();
      res.end();
      return;
    }
    while (!ended) {
      const step = await iterator.next();
      if (step.done || ended) break;
      const bytes = chunkBytes(step.value);
      if (bytes.length === 0) continue;
      if (!res.write(bytes) && !(await drained(res))) break;
    }
    ended = true;
    if (!res.destroyed) res.end();
  } catch (err) {
    logError(err, context.requestId);
    stop();
    if (res.headersSent) res.destroy();
    else send(res, errorResult(500, `invalid response: ${errorMessage(err)}`), context);
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

/** A streamed body read to its end, for one-shot mode's result line. */
async function collect(stream) {
  const iterator = iteratorOf(stream);
  const parts = [];
  for (;;) {
    const step = await iterator.next();
    if (step.done) break;
    parts.push(chunkBytes(step.value));
  }
  const buf = Buffer.concat(parts);
  return isUtf8(buf) ? buf.toString('utf8') : buf.toString('base64');
}

/**
 * context.signal: aborted when the client goes away before its answer is complete. Made on first
 * use, so that a handler that never asks pays nothing, and not enumerable, so that a context
 * returned as JSON is what it was.
 */
function attachSignal(context, res) {
  let controller;
  Object.defineProperty(context, 'signal', {
    enumerable: false,
    get() {
      if (controller) return controller.signal;
      controller = new AbortController();
      const gone = () => {
        if (!res.writableFinished) controller.abort(new Error('the client closed the connection'));
      };
      if (res.closed) gone();
      else res.once('close', gone);
      return controller.signal;
    },
  });
  return context;
}

function errorResult(statusCode, message) {
  const body = { error: message };
  return {
    statusCode,
    headers: { 'content-type': JSON_TYPE },
    payload: JSON.stringify(body),
    oneShotBody: body,
  };
}

function logError(err, requestId) {
  const detail = err instanceof Error && err.stack ? err.stack : errorMessage(err);
  process.stderr.write(`sless-runtime: handler error (request ${requestId}): ${detail}\n`);
}

/**
 * Invokes the handler with a timeout. Resolves to a mapped result; never rejects.
 */
function invoke(handler, event, context) {
  return new Promise((resolve) => {
    let done = false;
    const finish = (mapped) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(mapped);
    };
    const timer = setTimeout(() => {
      if (done) return;
      process.stderr.write(
        `sless-runtime: request ${context.requestId} timed out after ${timeoutSec}s (handler keeps running)\n`,
      );
      finish(errorResult(504, `function timed out after ${timeoutSec}s`));
    }, timeoutMs);
    const onValue = (value) => {
      if (done) return;
      try {
        finish(mapResult(value));
      } catch (err) {
        logError(err, context.requestId);
        finish(errorResult(500, `cannot serialize result: ${errorMessage(err)}`));
      }
    };
    const onError = (err) => {
      if (done) return;
      logError(err, context.requestId);
      finish(errorResult(500, errorMessage(err)));
    };
    try {
      const ret = handler(event, context);
      if (ret !== null && typeof ret === 'object' && typeof ret.then === 'function')
        ret.then(onValue, onError);
      else onValue(ret);
    } catch (err) {
      onError(err);
    }
  });
}

// --- server -----------------------------------------------------------------------------------------

function send(res, mapped, context) {
  if (res.headersSent || res.destroyed) {
    if (mapped.stream) Promise.resolve(iteratorOf(mapped.stream).return?.()).catch(() => {});
    return;
  }
  if (mapped.stream) {
    void streamOut(res, mapped, context);
    return;
  }
  const { payload } = mapped;
  const headers = mapped.headers;
  headers['content-length'] = Buffer.byteLength(payload);
  try {
    res.writeHead(mapped.statusCode, headers);
  } catch (err) {
    // invalid status code or header value from the handler
    const fallback = errorResult(500, `invalid response: ${errorMessage(err)}`);
    fallback.headers['content-length'] = Buffer.byteLength(fallback.payload);
    res.writeHead(500, fallback.headers);
    res.end(fallback.payload);
    return;
  }
  res.end(payload);
}

const HEALTH = JSON.stringify({ status: 'ok' });

/**
 * A request to switch protocols (a WebSocket) goes to the module's `upgrade(req, socket, head,
 * context)`, which accepts it with a library such as `ws` (`handleUpgrade`). Without one it is
 * refused with 400. An error thrown there closes that socket, nothing else.
 */
function onUpgrade(upgrade, req, socket, head) {
  socket.on('error', () => socket.destroy());
  const refuse = (status, reason, message) => {
    const payload = JSON.stringify({ error: message });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(payload)}\r\nconnection: close\r\n\r\n${payload}`,
    );
  };
  if (!upgrade) {
    refuse(
      400,
      'Bad Request',
      `${entrypoint} does not accept WebSockets: its module exports no "upgrade" function`,
    );
    return;
  }
  const context = makeContext(req.headers);
  try {
    const ret = upgrade(req, socket, head, context);
    if (ret !== null && typeof ret === 'object' && typeof ret.then === 'function')
      ret.then(undefined, (err) => {
        logError(err, context.requestId);
        socket.destroy();
      });
  } catch (err) {
    logError(err, context.requestId);
    if (socket.writable) refuse(500, 'Internal Server Error', errorMessage(err));
    else socket.destroy();
  }
}

function startServer({ handler, upgrade }) {
  const server = http.createServer({ keepAlive: true, keepAliveTimeout: 65_000 }, (req, res) => {
    const url = req.url || '/';
    const q = url.indexOf('?');
    const reqPath = q === -1 ? url : url.slice(0, q);
    if (req.method === 'GET' && reqPath === '/healthz') {
      res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': HEALTH.length });
      res.end(HEALTH);
      return;
    }
    const declared = Number(req.headers['content-length']);
    if (declared > MAX_BODY) {
      tooLarge(res);
      return;
    }
    const chunks = [];
    let size = 0;
    let aborted = false;
    req.on('data', (chunk) => {
      if (aborted) return;
      size += chunk.length;
      if (size > MAX_BODY) {
        aborted = true;
        tooLarge(res);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (aborted) return;
      const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      const headers = req.headers;
      const [body, isBase64Encoded] = decodeBody(buf, headers['content-type']);
      const event = {
        method: req.method,
        path: reqPath,
        query: parseQuery(q === -1 ? '' : url.slice(q + 1)),
        headers,
        body,
        isBase64Encoded,
      };
      const context = attachSignal(makeContext(headers), res);
      invoke(handler, event, context).then((mapped) => send(res, mapped, context));
    });
  });
  server.on('upgrade', (req, socket, head) => onUpgrade(upgrade, req, socket, head));
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  server.on('clientError', (_err, socket) => {
    if (socket.writable)
      socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  });
  // SLESS_SOCKET: listen on a unix socket instead of a port. The sandboxed local platform gives each
  // function its own network namespace, where no port is reachable from outside; the socket file is.
  const socketPath = env.SLESS_SOCKET || undefined;
  const where = socketPath ? `socket ${socketPath}` : `port ${port}`;
  server.on('error', (err) => {
    process.stderr.write(`sless-runtime: cannot listen on ${where}: ${err.message}\n`);
    process.exit(1);
  });
  // SLESS_HOST: the local platform binds to loopback so only its proxy reaches the function.
  const host = env.SLESS_HOST || undefined;
  const listening = () => {
    process.stderr.write(
      `sless-runtime: ${entrypoint} listening on ${socketPath ?? `${host ?? ''}:${port}`}\n`,
    );
  };
  if (socketPath) server.listen(socketPath, listening);
  else server.listen(port, host, listening);
  // SLESS_LIFELINE=stdin: the parent holds our stdin open; EOF means it died (even by SIGKILL), so exit
  // rather than linger as an orphan.
  if (env.SLESS_LIFELINE === 'stdin') {
    process.stdin.on('end', () => process.exit(0));
    process.stdin.on('error', () => process.exit(0));
    process.stdin.resume();
  }
  const stop = () => {
    // The lifeline keeps stdin open; let go of it so the process exits once requests have drained.
    process.stdin.destroy();
    server.close();
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5_000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/** How long a client answered 413 may go on sending (read and discarded) before it is cut off. */
const LINGER_MS = 2000;

function tooLarge(res) {
  const payload = JSON.stringify({ error: `request body exceeds ${MAX_BODY} bytes` });
  res.shouldKeepAlive = false;
  res.writeHead(413, {
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(payload),
    connection: 'close',
  });
  // Closed at once, the connection of a client still sending would be reset, and the sless proxy's
  // write then fails (EPIPE) before it has read this answer: it would answer 502. So the answer goes
  // out with a FIN, the rest of the body is read and discarded, and the connection closes when the
  // client stops (the proxy does, once it has the answer) or after LINGER_MS.
  const socket = res.socket;
  if (socket) {
    socket.destroySoon = () => {
      if (socket.writable) socket.end();
      setTimeout(() => socket.destroy(), LINGER_MS).unref();
    };
  }
  res.req?.resume();
  res.end(payload);
}

// --- one-shot mode ----------------------------------------------------------------------------------

// One-shot output must end with its own SLESS_RESULT line even if user code wrote to stdout without
// a trailing newline, so track whether stdout is at the start of a line.
let stdoutAtLineStart = true;
function trackStdout() {
  const write = process.stdout.write;
  process.stdout.write = function trackedWrite(chunk, ...rest) {
    if (typeof chunk === 'string') {
      if (chunk.length > 0) stdoutAtLineStart = chunk.endsWith('\n');
    } else if (chunk && chunk.length > 0) {
      stdoutAtLineStart = chunk[chunk.length - 1] === 10;
    }
    return write.call(this, chunk, ...rest);
  };
}

async function oneShot(handler, raw) {
  let body;
  try {
    body = JSON.parse(raw);
  } catch (err) {
    process.stderr.write(`sless-runtime: SLESS_EVENT is not valid JSON: ${oneLine(err)}\n`);
    process.exit(2);
  }
  const headers = { 'content-type': JSON_TYPE };
  const event = { method: 'POST', path: '/', query: {}, headers, body, isBase64Encoded: false };
  const context = makeContext(headers);
  // Nobody can leave a one-shot run early: its signal never aborts.
  Object.defineProperty(context, 'signal', { enumerable: false, value: new AbortController().signal });
  const mapped = await invoke(handler, event, context);
  if (mapped.stream) {
    try {
      mapped.oneShotBody = await collect(mapped.stream);
    } catch (err) {
      logError(err, 'one-shot');
      Object.assign(mapped, errorResult(500, errorMessage(err)));
    }
  }
  const line = `${stdoutAtLineStart ? '' : '\n'}SLESS_RESULT ${JSON.stringify({ statusCode: mapped.statusCode, body: mapped.oneShotBody })}\n`;
  const code = mapped.statusCode < 500 ? 0 : 1;
  process.stdout.write(line, () => process.exit(code));
}

// A promise the handler forgot to await must not take the function down (Node 20 would exit).
// Uncaught exceptions still crash the process; the platform restarts it.
process.on('unhandledRejection', (reason) => {
  const detail = reason instanceof Error && reason.stack ? reason.stack : errorMessage(reason);
  process.stderr.write(`sless-runtime: unhandled promise rejection: ${detail}\n`);
});

if (env.SLESS_EVENT !== undefined) trackStdout();
const loaded = await loadHandler();
if (env.SLESS_EVENT !== undefined) await oneShot(loaded.handler, env.SLESS_EVENT);
else startServer(loaded);
