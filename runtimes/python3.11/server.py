#!/usr/bin/env python3
"""sless Python 3.11 runtime: one HTTP server per function, stdlib only.

This file is copied into every function build, so it must not import anything outside the
standard library. Contract: see runtimes/README.md.
"""

import base64
import json
import os
import queue
import select
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

MAX_BODY = 32 * 1024 * 1024
EXIT_ENTRYPOINT = 3
JSON_TYPE = "application/json"

ENTRYPOINT = os.environ.get("SLESS_ENTRYPOINT") or "handler.handle"
CODE_DIR = os.path.abspath(os.environ.get("SLESS_CODE_DIR") or os.getcwd())
FUNCTION_NAME = os.environ.get("SLESS_FUNCTION_NAME", "")
NAMESPACE = os.environ.get("SLESS_NAMESPACE", "")


def _positive(raw, default):
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if value > 0 else default


TIMEOUT_SEC = _positive(os.environ.get("SLESS_TIMEOUT_SEC"), 30.0)
TIMEOUT_LABEL = f"{TIMEOUT_SEC:g}"


# --- loading ------------------------------------------------------------------------------------


def _fatal(message, exc=None):
    if exc is not None:
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f'sless-runtime: cannot load entrypoint "{ENTRYPOINT}": {message}\n')
    sys.stderr.flush()
    os._exit(EXIT_ENTRYPOINT)


def load_handler():
    module_name, dot, fn_name = ENTRYPOINT.rpartition(".")
    if not dot or not module_name or not fn_name:
        _fatal('SLESS_ENTRYPOINT must look like "module.function" (e.g. "handler.handle" or "lib/api.handle")')
    # The runtime's own directory must not shadow user modules (a user module named "server").
    script_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != script_dir]
    sys.path.insert(0, CODE_DIR)
    base = os.path.join(CODE_DIR, module_name)
    if not (os.path.isfile(base + ".py") or os.path.isdir(base)):
        _fatal(f'module "{module_name}" not found in {CODE_DIR}')
    dotted = module_name.strip("/").replace("/", ".")
    try:
        import importlib

        module = importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name and (dotted == exc.name or dotted.startswith(exc.name + ".")):
            _fatal(f'module "{module_name}" not found in {CODE_DIR}')
        _fatal(f'module "{module_name}" failed to load: {exc}', exc)
    except BaseException as exc:  # SyntaxError, errors raised at import time, SystemExit, ...
        _fatal(f'module "{module_name}" failed to load: {type(exc).__name__}: {exc}', exc)
    # Names the module itself defines only: not dunders such as __loader__ or __class__, which every
    # module has without the user writing them (the Node runtime takes own properties only, likewise).
    fn = None if fn_name.startswith("__") else vars(module).get(fn_name)
    if not callable(fn):
        _fatal(f'module "{module_name}" has no function "{fn_name}"')
    # WebSockets: the module's own `upgrade`, if any, takes the connections that ask to switch.
    upgrade = vars(module).get("upgrade")
    RequestHandler.upgrade = staticmethod(upgrade) if callable(upgrade) else None
    return fn


# --- invocation ---------------------------------------------------------------------------------


class _Workers:
    """Grows on demand and reuses idle threads. A timed-out handler keeps its thread busy, so a
    fixed-size pool could starve; this one spawns a new thread when none is idle."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job):
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        if spawn:
            threading.Thread(target=self._run, name="sless-handler", daemon=True).start()
        self._jobs.put(job)

    def _run(self):
        get = self._jobs.get
        while True:
            job = get()
            job()
            with self._lock:
                self._idle += 1


_workers = _Workers()
_local = threading.local()


def _await(awaitable):
    loop = getattr(_local, "loop", None)
    if loop is None:
        import asyncio

        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop.run_until_complete(awaitable)


class HandlerError(Exception):
    pass


def _error_message(exc):
    msg = str(exc)
    return msg if msg else type(exc).__name__


def _json_default(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default)


_FRAMING_HEADERS = ("content-length", "transfer-encoding")


class Stream:
    """A body produced while it is sent: the iterator, generator or async generator a handler gave."""

    __slots__ = ("source",)

    def __init__(self, source):
        self.source = source


def _is_stream(value):
    # Generators, async generators and other iterators; str, bytes, dict and list have no __next__.
    return hasattr(value, "__next__") or hasattr(value, "__anext__")


def map_result(result):
    """Returns (status, headers list, payload bytes or Stream, one-shot body)."""
    if _is_stream(result):
        return 200, [("content-type", "application/octet-stream")], Stream(result), None
    if isinstance(result, dict):
        status = result.get("statusCode")
        if isinstance(status, (int, float)) and not isinstance(status, bool):
            headers = []
            has_type = False
            raw_headers = result.get("headers") or {}
            if isinstance(raw_headers, dict):
                for name, value in raw_headers.items():
                    if value is None:
                        continue
                    name = str(name)
                    lower = name.lower()
                    if lower in _FRAMING_HEADERS:  # the runtime computes the body length
                        continue
                    if lower == "content-type":
                        has_type = True
                    if isinstance(value, (list, tuple)):
                        headers.extend((name, str(v)) for v in value)
                    else:
                        headers.append((name, str(value)))
            body = result.get("body")
            if body is None:
                payload, shot, ctype = b"", None, None
            elif _is_stream(body):
                payload, shot, ctype = Stream(body), None, "application/octet-stream"
            elif result.get("isBase64Encoded") is True and isinstance(body, str):
                payload, shot, ctype = base64.b64decode(body), body, "application/octet-stream"
            elif isinstance(body, str):
                payload, shot, ctype = body.encode("utf-8"), body, "text/plain; charset=utf-8"
            elif isinstance(body, (bytes, bytearray, memoryview)):
                payload = bytes(body)
                shot, ctype = base64.b64encode(payload).decode("ascii"), "application/octet-stream"
            else:
                payload, shot, ctype = dumps(body).encode("utf-8"), body, JSON_TYPE
            if ctype and not has_type:
                headers.append(("content-type", ctype))
            return int(status), headers, payload, shot
    return 200, [("content-type", JSON_TYPE)], dumps(result).encode("utf-8"), result


def error_result(status, message):
    body = {"error": message}
    return status, [("content-type", JSON_TYPE)], dumps(body).encode("utf-8"), body


def invoke(fn, event, context):
    done = threading.Lock()
    done.acquire()
    box = []

    def job():
        try:
            result = fn(event, context)
            if hasattr(result, "__await__"):
                result = _await(result)
            try:
                box.append(map_result(result))
            except Exception as exc:
                _log_error(exc, context["requestId"])
                box.append(error_result(500, f"cannot serialize result: {_error_message(exc)}"))
        except BaseException as exc:
            _log_error(exc, context["requestId"])
            box.append(error_result(500, _error_message(exc)))
        finally:
            done.release()

    _workers.submit(job)
    if not done.acquire(timeout=TIMEOUT_SEC):
        sys.stderr.write(
            f"sless-runtime: request {context['requestId']} timed out after {TIMEOUT_LABEL}s "
            "(handler keeps running)\n"
        )
        return error_result(504, f"function timed out after {TIMEOUT_LABEL}s")
    return box[0]


def _log_error(exc, request_id):
    text = "".join(traceback.format_exception(exc))
    sys.stderr.write(f"sless-runtime: handler error (request {request_id}): {text}")
    sys.stderr.flush()


class Context(dict):
    """The invocation context: the same dict as before (its JSON is unchanged), plus `cancelled`, a
    threading.Event set when the client goes away before a streamed answer is complete."""

    __slots__ = ("cancelled",)


def make_context(headers):
    rid = headers.get("x-request-id")
    context = Context(
        functionName=FUNCTION_NAME,
        namespace=NAMESPACE,
        requestId=rid if rid else str(uuid.uuid4()),
        deadlineMs=int(time.time() * 1000 + TIMEOUT_SEC * 1000),
    )
    context.cancelled = threading.Event()
    return context


# --- streamed bodies ----------------------------------------------------------------------------


def _chunk_bytes(chunk):
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    if isinstance(chunk, (bytes, bytearray, memoryview)):
        return bytes(chunk)
    raise TypeError(f"a streamed chunk must be str or bytes, not {type(chunk).__name__}")


_END = object()


class _Chunks:
    """Steps through a streamed body on the calling thread: a sync iterator directly, an async one
    on the thread's event loop. cancel() may come from another thread: it cancels the async step in
    progress (the generator sees CancelledError); a sync generator sees GeneratorExit at its next
    yield, when close() runs."""

    def __init__(self, source):
        self._source = source
        self._async = hasattr(source, "__anext__")
        self._task = None
        self._loop = None
        self._lock = threading.Lock()

    def next(self):
        """The next chunk, or _END."""
        if not self._async:
            return next(self._source, _END)
        import asyncio

        loop = getattr(_local, "loop", None)
        if loop is None:
            loop = asyncio.new_event_loop()
            _local.loop = loop

        async def step():
            return await self._source.__anext__()

        with self._lock:
            self._loop = loop
            self._task = loop.create_task(step())
        try:
            return loop.run_until_complete(self._task)
        except StopAsyncIteration:
            return _END
        finally:
            with self._lock:
                self._task = None

    def cancel(self):
        with self._lock:
            if self._task is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)

    def close(self):
        try:
            if self._async:
                aclose = getattr(self._source, "aclose", None)
                if aclose is not None:
                    _await(aclose())
            else:
                close = getattr(self._source, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # a generator that fails while closing is the handler's error
            _log_error(exc, "stream close")


def _watch_disconnect(sock, finished, on_gone):
    """Calls on_gone when the client closes its end while a stream is still being sent: the socket
    turns readable with nothing to read. Data instead (a pipelined request) ends the watch."""
    while not finished.is_set():
        try:
            readable, _, _ = select.select([sock], [], [], 0.25)
        except (OSError, ValueError):
            return
        if finished.is_set():
            return
        if not readable:
            continue
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if data == b"" and not finished.is_set():
            on_gone()
        return


# --- request -> event ---------------------------------------------------------------------------


def _media_type(content_type):
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _is_json(mt):
    return mt == JSON_TYPE or mt.endswith("+json")


def _is_text(mt):
    return (
        mt == ""
        or mt.startswith("text/")
        or mt in ("application/x-www-form-urlencoded", "application/xml", "application/javascript", "application/graphql")
        or mt.endswith("+xml")
    )


def decode_body(raw, content_type):
    if not raw:
        return None, False
    mt = _media_type(content_type)
    if _is_json(mt) or _is_text(mt):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            if _is_json(mt):
                try:
                    return json.loads(text), False
                except ValueError:
                    pass
            return text, False
    return base64.b64encode(raw).decode("ascii"), True


def parse_query(qs):
    query = {}
    if not qs:
        return query
    for key, value in parse_qsl(qs, keep_blank_values=True):
        prev = query.get(key)
        if prev is None:
            query[key] = value
        elif isinstance(prev, list):
            prev.append(value)
        else:
            query[key] = [prev, value]
    return query


class BodyTooLarge(Exception):
    pass


class BadRequest(Exception):
    pass


# --- HTTP server --------------------------------------------------------------------------------

_HEALTH = b'{"status":"ok"}'


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "sless-python"
    sys_version = ""
    fn = None
    upgrade = None

    def log_message(self, format, *args):  # noqa: A002 - per-request logging costs throughput
        pass

    def handle_one_request(self):
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = ""
                self.request_version = ""
                self.command = ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self.dispatch()
        except (TimeoutError, ConnectionError):
            self.close_connection = True

    def _read_body(self):
        te = self.headers.get("Transfer-Encoding")
        if te and "chunked" in te.lower():
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        try:
            n = int(length)
        except ValueError:
            raise BadRequest("invalid Content-Length") from None
        if n < 0:
            raise BadRequest("invalid Content-Length")
        if n > MAX_BODY:
            raise BodyTooLarge()
        data = self.rfile.read(n)
        if len(data) != n:
            raise ConnectionError("client closed connection mid-body")
        return data

    def _read_chunked(self):
        parts = []
        total = 0
        while True:
            line = self.rfile.readline(65537)
            if not line:
                raise ConnectionError("client closed connection mid-body")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BadRequest("invalid chunk size") from None
            if size == 0:
                while True:  # trailers
                    trailer = self.rfile.readline(65537)
                    if trailer in (b"\r\n", b"\n", b""):
                        break
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                raise BodyTooLarge()
            chunk = self.rfile.read(size)
            if len(chunk) != size:
                raise ConnectionError("client closed connection mid-body")
            parts.append(chunk)
            self.rfile.readline(3)  # CRLF after the chunk

    def _send(self, status, headers, payload):
        reason = self.responses.get(status, ("",))[0]
        out = [f"HTTP/1.1 {status} {reason}\r\n"]
        for name, value in headers:
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:  # no header injection
                name, value = name.replace("\r", "").replace("\n", ""), value.replace("\r", " ").replace("\n", " ")
            out.append(f"{name}: {value}\r\n")
        out.append(f"content-length: {len(payload)}\r\n")
        if self.close_connection:
            out.append("connection: close\r\n")
        out.append("\r\n")
        head = "".join(out).encode("latin-1", "replace")
        if self.command == "HEAD":
            self.wfile.write(head)
        elif len(payload) < 65536:
            self.wfile.write(head + payload)
        else:
            self.wfile.write(head)
            self.wfile.write(payload)

    def _stream(self, status, headers, stream, context):
        """Sends a streamed body: headers at once, then each chunk as a chunk of its own, written as
        the handler produces it. Writes block while the client is slow, so the handler is not asked
        for more until it reads. A client that leaves sets context.cancelled and closes the generator."""
        reason = self.responses.get(status, ("",))[0]
        out = [f"HTTP/1.1 {status} {reason}\r\n"]
        for name, value in headers:
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                name, value = name.replace("\r", "").replace("\n", ""), value.replace("\r", " ").replace("\n", " ")
            out.append(f"{name}: {value}\r\n")
        head_only = self.command == "HEAD"
        if not head_only:
            out.append("transfer-encoding: chunked\r\n")
        if self.close_connection:
            out.append("connection: close\r\n")
        out.append("\r\n")
        chunks = _Chunks(stream.source)
        finished = threading.Event()
        try:
            self.wfile.write("".join(out).encode("latin-1", "replace"))
            if head_only:
                return

            def gone():
                context.cancelled.set()
                chunks.cancel()

            threading.Thread(
                target=_watch_disconnect, args=(self.connection, finished, gone), name="sless-watch", daemon=True
            ).start()
            while not context.cancelled.is_set():
                try:
                    chunk = chunks.next()
                except BaseException as exc:
                    if context.cancelled.is_set():
                        break
                    _log_error(exc, context["requestId"])
                    self.close_connection = True  # no last chunk: the client sees the body cut short
                    return
                if chunk is _END:
                    break
                data = _chunk_bytes(chunk)
                if data:
                    self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            if context.cancelled.is_set():
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
        except TypeError as exc:
            _log_error(exc, context["requestId"])
            self.close_connection = True
        except OSError:
            context.cancelled.set()
            self.close_connection = True
        finally:
            finished.set()
            chunks.close()

    def _upgrade(self, path, qs):
        """A request to switch protocols (a WebSocket) goes to the module's
        `upgrade(event, context, sock, reader)`: it answers the handshake and then owns the connection,
        with a library such as websockets' sans-I/O protocol; `reader` holds bytes the client sent
        after its request head. The connection closes when it returns."""
        self.close_connection = True
        if self.upgrade is None:
            message = f'{ENTRYPOINT} does not accept WebSockets: its module has no "upgrade" function'
            self._send(400, *error_result(400, message)[1:3])
            return
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            prev = headers.get(name)
            headers[name] = value if prev is None else f"{prev}, {value}"
        event = {
            "method": self.command,
            "path": path,
            "query": parse_query(qs),
            "headers": headers,
            "body": None,
            "isBase64Encoded": False,
        }
        context = make_context(headers)
        try:
            self.upgrade(event, context, self.connection, self.rfile)
        except BaseException as exc:  # the handler's failure ends its connection, nothing else
            _log_error(exc, context["requestId"])

    def dispatch(self):
        target = self.path
        qpos = target.find("?")
        path, qs = (target, "") if qpos == -1 else (target[:qpos], target[qpos + 1 :])
        if self.command == "GET" and path == "/healthz":
            self._send(200, [("content-type", JSON_TYPE)], _HEALTH)
            return
        if self.headers.get("Upgrade"):
            self._upgrade(path, qs)
            return
        try:
            raw = self._read_body()
        except BodyTooLarge:
            self.close_connection = True
            self._send(413, *error_result(413, f"request body exceeds {MAX_BODY} bytes")[1:3])
            return
        except BadRequest as exc:
            self.close_connection = True
            self._send(400, *error_result(400, str(exc))[1:3])
            return
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            prev = headers.get(name)
            headers[name] = value if prev is None else f"{prev}, {value}"
        body, is_b64 = decode_body(raw, headers.get("content-type"))
        event = {
            "method": self.command,
            "path": path,
            "query": parse_query(qs),
            "headers": headers,
            "body": body,
            "isBase64Encoded": is_b64,
        }
        context = make_context(headers)
        status, out_headers, payload, _ = invoke(self.fn, event, context)
        if isinstance(payload, Stream):
            self._stream(status, out_headers, payload, context)
        else:
            self._send(status, out_headers, payload)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def server_bind(self):
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn), which can stall cold starts.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port


class UnixRequestHandler(RequestHandler):
    # TCP_NODELAY does not exist on a unix socket, and the peer has no address.
    disable_nagle_algorithm = False

    def address_string(self):
        return "unix"


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 1024


def serve(fn):
    port = int(os.environ.get("PORT") or "8080")
    RequestHandler.fn = staticmethod(fn)
    # SLESS_SOCKET: a unix socket instead of a port. The sandboxed local platform gives each function
    # its own network namespace, where no port is reachable from outside; the socket file is.
    socket_path = os.environ.get("SLESS_SOCKET") or ""
    # SLESS_HOST: the local platform binds to loopback so only its proxy reaches the function.
    host = os.environ.get("SLESS_HOST") or "0.0.0.0"
    where = f"socket {socket_path}" if socket_path else f"port {port}"
    try:
        if socket_path:
            httpd = UnixServer(socket_path, UnixRequestHandler)
        else:
            httpd = Server((host, port), RequestHandler)
    except OSError as exc:
        sys.stderr.write(f"sless-runtime: cannot listen on {where}: {exc}\n")
        sys.exit(1)

    def stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if os.environ.get("SLESS_LIFELINE") == "stdin":
        # The parent holds our stdin open; EOF means it died (even by SIGKILL): exit, never linger.
        def watch_parent():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            finally:
                os._exit(0)

        threading.Thread(target=watch_parent, daemon=True).start()
    sys.stderr.write(f"sless-runtime: {ENTRYPOINT} listening on {socket_path or f':{port}'}\n")
    sys.stderr.flush()
    httpd.serve_forever(poll_interval=0.5)
    httpd.server_close()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: the lifeline thread is blocked reading stdin, and interpreter shutdown would abort on it.
    os._exit(0)


# --- one-shot mode ------------------------------------------------------------------------------


class _TrackingStdout:
    """Remembers whether stdout is at the start of a line, so that the SLESS_RESULT line is never
    glued to user output that lacks a trailing newline."""

    def __init__(self, inner):
        self._inner = inner
        self.at_line_start = True

    def write(self, text):
        if text:
            self.at_line_start = text.endswith("\n")
        return self._inner.write(text)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def one_shot(fn, raw):
    try:
        body = json.loads(raw)
    except ValueError as exc:
        sys.stderr.write(f"sless-runtime: SLESS_EVENT is not valid JSON: {exc}\n")
        sys.stderr.flush()
        os._exit(2)
    headers = {"content-type": JSON_TYPE}
    event = {"method": "POST", "path": "/", "query": {}, "headers": headers, "body": body, "isBase64Encoded": False}
    status, _, payload, shot = invoke(fn, event, make_context(headers))
    if isinstance(payload, Stream):
        chunks = _Chunks(payload.source)
        try:
            parts = []
            while (chunk := chunks.next()) is not _END:
                parts.append(_chunk_bytes(chunk))
            data = b"".join(parts)
            try:
                shot = data.decode("utf-8")
            except UnicodeDecodeError:
                shot = base64.b64encode(data).decode("ascii")
        except BaseException as exc:
            _log_error(exc, "one-shot")
            status, shot = 500, {"error": _error_message(exc)}
    try:
        line = dumps({"statusCode": status, "body": shot})
    except (TypeError, ValueError):
        line = dumps({"statusCode": status, "body": str(shot)})
    newline = "" if getattr(sys.stdout, "at_line_start", True) else "\n"
    sys.stdout.write(f"{newline}SLESS_RESULT {line}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: a timed-out handler thread (or a non-daemon thread the user started) must not keep us alive.
    os._exit(0 if status < 500 else 1)


def main():
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except AttributeError:
        pass
    raw_event = os.environ.get("SLESS_EVENT")
    if raw_event is not None:
        sys.stdout = _TrackingStdout(sys.stdout)
    fn = load_handler()
    if raw_event is not None:
        one_shot(fn, raw_event)
    else:
        serve(fn)


if __name__ == "__main__":
    main()
