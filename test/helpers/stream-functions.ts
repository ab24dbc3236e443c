/**
 * A Python and a Go function for the local /fn/ streaming and WebSocket suites, each as the files
 * of its directory in a test repository: an SSE stream whose last event waits for a gate the test
 * opens (/sse, /release), a stream held until its client leaves, with what the handler observed
 * (/hold, /observed), and a WebSocket echo (/ws) accepted with the language's well-kept library,
 * `websockets` (its sans-I/O ServerProtocol) and `github.com/coder/websocket`, which the local
 * build installs from PyPI and the Go module proxy.
 */
import { functionManifest } from './git.js';

export const STREAM_RUNTIMES = ['python3.11', 'go1.21'] as const;
export type StreamRuntime = (typeof STREAM_RUNTIMES)[number];

const PYTHON = `
import threading

from websockets.frames import Opcode
from websockets.server import ServerProtocol

_gates = {}
_observed = {}
_lock = threading.Lock()


def _gate(gate_id):
    with _lock:
        return _gates.setdefault(gate_id, threading.Event())


def _events(gate_id):
    yield "data: first\\n\\n"
    _gate(gate_id).wait(30)
    yield "data: last\\n\\n"


def _held(gate_id, context):
    try:
        yield "data: first\\n\\n"
        if context.cancelled.wait(30):
            _observed[gate_id] = "cancelled"
    finally:
        _observed.setdefault(gate_id, "closed")


def handle(event, context):
    path = event["path"]
    gate_id = event["query"].get("id", "")
    sse = {"content-type": "text/event-stream"}
    if path == "/sse":
        return {"statusCode": 200, "headers": sse, "body": _events(gate_id)}
    if path == "/release":
        _gate(gate_id).set()
        return {"released": gate_id}
    if path == "/hold":
        return {"statusCode": 200, "headers": sse, "body": _held(gate_id, context)}
    if path == "/observed":
        return {"observed": _observed.get(gate_id)}
    return {"ok": True}


def upgrade(event, context, sock, reader):
    # The runtime has read the request head; the protocol parses it again from its bytes.
    head = f"GET {event['path']} HTTP/1.1\\r\\n"
    for name, value in event["headers"].items():
        head += f"{name}: {value}\\r\\n"
    protocol = ServerProtocol()
    protocol.receive_data((head + "\\r\\n").encode("latin-1"))
    request = protocol.events_received()[0]
    protocol.send_response(protocol.accept(request))

    def flush():
        for data in protocol.data_to_send():
            if data:
                sock.sendall(data)

    flush()
    while True:
        data = reader.read1(65536)
        if not data:
            protocol.receive_eof()
            flush()
            return
        protocol.receive_data(data)
        for frame in protocol.events_received():
            if frame.opcode is Opcode.TEXT:
                protocol.send_text(frame.data)
            elif frame.opcode is Opcode.BINARY:
                protocol.send_binary(frame.data)
        flush()
        if protocol.close_expected():
            return
`;

const GO = `package handler

import (
	"context"
	"sync"

	"github.com/coder/websocket"
	sless "sless.dev/runtime"
)

var (
	mu       sync.Mutex
	gates    = map[string]chan struct{}{}
	observed = map[string]string{}
)

func gate(id string) chan struct{} {
	mu.Lock()
	defer mu.Unlock()
	g, ok := gates[id]
	if !ok {
		g = make(chan struct{})
		gates[id] = g
	}
	return g
}

func Handle(ctx context.Context, event sless.Event) (any, error) {
	id := event.Query.Get("id")
	switch event.Path {
	case "/sse":
		w := sless.Stream(ctx)
		w.Header().Set("content-type", "text/event-stream")
		if _, err := w.WriteString("data: first\\n\\n"); err != nil {
			return nil, err
		}
		select {
		case <-gate(id):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		_, err := w.WriteString("data: last\\n\\n")
		return nil, err
	case "/release":
		g := gate(id)
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-g:
		default:
			close(g)
		}
		return map[string]string{"released": id}, nil
	case "/hold":
		w := sless.Stream(ctx)
		w.Header().Set("content-type", "text/event-stream")
		if _, err := w.WriteString("data: first\\n\\n"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		mu.Lock()
		observed[id] = "cancelled"
		mu.Unlock()
		return nil, ctx.Err()
	case "/observed":
		mu.Lock()
		defer mu.Unlock()
		if v, ok := observed[id]; ok {
			return map[string]string{"observed": v}, nil
		}
		return map[string]any{"observed": nil}, nil
	case "/ws":
		w, r, ok := sless.Upgrade(ctx)
		if !ok {
			return map[string]bool{"ok": false}, nil
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return nil, err
		}
		defer conn.CloseNow()
		for {
			kind, data, err := conn.Read(ctx)
			if err != nil {
				return nil, nil
			}
			if err := conn.Write(ctx, kind, data); err != nil {
				return nil, nil
			}
		}
	}
	return map[string]bool{"ok": true}, nil
}
`;

// coder/websocket v1.8.12 is the newest release that builds with Go 1.21, the runtime's image.
const GO_MOD = `module example.com/streams

go 1.21

require github.com/coder/websocket v1.8.12
`;

const GO_SUM = `github.com/coder/websocket v1.8.12 h1:5bUXkEPPIbewrnkU8LTCLVaxi4N4J8ahufH2vlo4NAo=
github.com/coder/websocket v1.8.12/go.mod h1:LNVeNrXQZfe5qhS9ALED3uA+l5pPqvwXg3CKoDBB2gs=
`;

/** The files of the function `name` in `runtime`, keyed by their path in the repository. */
export function streamFunction(name: string, runtime: StreamRuntime, spec: Record<string, unknown> = {}) {
  if (runtime === 'python3.11')
    return {
      [`${name}/function.yaml`]: functionManifest(name, { runtime, entrypoint: 'handler.handle', ...spec }),
      [`${name}/handler.py`]: PYTHON,
      [`${name}/requirements.txt`]: 'websockets==15.0.1\n',
    };
  return {
    [`${name}/function.yaml`]: functionManifest(name, { runtime, entrypoint: 'handler.Handle', ...spec }),
    [`${name}/go.mod`]: GO_MOD,
    [`${name}/go.sum`]: GO_SUM,
    [`${name}/handler/handler.go`]: GO,
  };
}
