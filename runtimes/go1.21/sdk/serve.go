package sless

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// MaxBodyBytes is the largest accepted request body; larger requests get 413.
const MaxBodyBytes = 32 << 20

// Entrypoint is set at build time (-ldflags -X) to SLESS_ENTRYPOINT, for log lines.
var Entrypoint = "handler.Handle"

// HandlerFunc is the untyped handler signature.
type HandlerFunc func(ctx context.Context, event Event) (any, error)

// Serve runs the function: an HTTP server on $PORT, or, when SLESS_EVENT is set, a single
// invocation that prints "SLESS_RESULT {...}" and exits. It never returns.
func Serve[T any](handler func(ctx context.Context, event Event) (T, error)) {
	rt := newRuntime(func(ctx context.Context, ev Event) (any, error) { return handler(ctx, ev) })
	if raw, ok := os.LookupEnv("SLESS_EVENT"); ok {
		os.Exit(rt.oneShot(raw))
	}
	os.Exit(rt.serve())
}

type runtime struct {
	handler      HandlerFunc
	functionName string
	namespace    string
	timeout      time.Duration
	timeoutLabel string
}

func newRuntime(h HandlerFunc) *runtime {
	secs := 30.0
	if v, err := strconv.ParseFloat(os.Getenv("SLESS_TIMEOUT_SEC"), 64); err == nil && v > 0 {
		secs = v
	}
	return &runtime{
		handler:      h,
		functionName: os.Getenv("SLESS_FUNCTION_NAME"),
		namespace:    os.Getenv("SLESS_NAMESPACE"),
		timeout:      time.Duration(secs * float64(time.Second)),
		timeoutLabel: strconv.FormatFloat(secs, 'f', -1, 64),
	}
}

// result is a mapped handler outcome.
type result struct {
	status  int
	headers map[string][]string
	payload []byte
	shot    json.RawMessage // the body as shown in one-shot output
}

func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func errorResult(status int, msg string) result {
	body, _ := marshalJSON(map[string]string{"error": msg})
	return result{status: status, headers: jsonHeaders(), payload: body, shot: body}
}

func jsonHeaders() map[string][]string {
	return map[string][]string{"content-type": {"application/json"}}
}

func jsonString(s string) json.RawMessage {
	b, _ := marshalJSON(s)
	return b
}

func mapResult(v any) (result, error) {
	switch r := v.(type) {
	case Response:
		return mapResponse(&r)
	case *Response:
		if r != nil {
			return mapResponse(r)
		}
	case map[string]any:
		if sc, ok := numeric(r["statusCode"]); ok {
			resp := &Response{StatusCode: sc, Body: r["body"]}
			if b, ok := r["isBase64Encoded"].(bool); ok {
				resp.IsBase64Encoded = b
			}
			switch h := r["headers"].(type) {
			case map[string]string:
				resp.Headers = h
			case map[string][]string:
				resp.MultiValueHeaders = h
			case map[string]any:
				resp.Headers = make(map[string]string, len(h))
				resp.MultiValueHeaders = make(map[string][]string)
				for k, hv := range h {
					switch x := hv.(type) {
					case nil:
					case string:
						resp.Headers[k] = x
					case []string:
						resp.MultiValueHeaders[k] = x
					case []any:
						for _, p := range x {
							resp.MultiValueHeaders[k] = append(resp.MultiValueHeaders[k], fmt.Sprint(p))
						}
					default:
						resp.Headers[k] = fmt.Sprint(x)
					}
				}
			}
			return mapResponse(resp)
		}
	}
	body, err := marshalJSON(v)
	if err != nil {
		return result{}, err
	}
	return result{status: http.StatusOK, headers: jsonHeaders(), payload: body, shot: body}, nil
}

func numeric(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

func mapResponse(r *Response) (result, error) {
	headers := make(map[string][]string, len(r.Headers)+len(r.MultiValueHeaders)+1)
	hasType := false
	for k, v := range r.Headers {
		headers[k] = append(headers[k], v)
	}
	for k, vs := range r.MultiValueHeaders {
		headers[k] = append(headers[k], vs...)
	}
	for k := range headers {
		if strings.EqualFold(k, "content-type") {
			hasType = true
		}
	}
	res := result{status: r.StatusCode, headers: headers, shot: json.RawMessage("null")}
	ctype := ""
	switch b := r.Body.(type) {
	case nil:
	case string:
		if r.IsBase64Encoded {
			data, err := base64.StdEncoding.DecodeString(b)
			if err != nil {
				return result{}, fmt.Errorf("response body is not valid base64: %w", err)
			}
			res.payload, ctype = data, "application/octet-stream"
		} else {
			res.payload, ctype = []byte(b), "text/plain; charset=utf-8"
		}
		res.shot = jsonString(b)
	case []byte:
		res.payload, ctype = b, "application/octet-stream"
		res.shot = jsonString(base64.StdEncoding.EncodeToString(b))
	default:
		data, err := marshalJSON(b)
		if err != nil {
			return result{}, err
		}
		res.payload, ctype, res.shot = data, "application/json", data
	}
	if ctype != "" && !hasType {
		headers["content-type"] = []string{ctype}
	}
	return res, nil
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// invoke runs the handler in a goroutine with a deadline; it answers 504 when the deadline passes
// before the handler returns or starts a stream (the goroutine is not killed, but its ctx is
// cancelled). streamed reports that the handler streamed its answer to out itself: the result is
// then nothing to send, and a non-nil err means the stream failed and must be cut.
func (rt *runtime) invoke(parent context.Context, ev Event, out http.ResponseWriter) (res result, streamed bool, err error) {
	rid := ev.Headers["x-request-id"]
	if rid == "" {
		rid = newRequestID()
	}
	deadline := time.Now().Add(rt.timeout)
	inv := newInvocation(parent, deadline, out)
	stop := make(chan struct{})
	defer close(stop)
	timedOut := inv.watch(stop)
	defer inv.cancel(context.Canceled)
	ctx := WithContext(inv, Context{
		FunctionName: rt.functionName,
		Namespace:    rt.namespace,
		RequestID:    rid,
		DeadlineMs:   deadline.UnixMilli(),
	})
	type outcome struct {
		res result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(os.Stderr, "sless-runtime: handler panic (request %s): %v\n%s", rid, p, debug.Stack())
				done <- outcome{errorResult(http.StatusInternalServerError, fmt.Sprint(p)), fmt.Errorf("panic: %v", p)}
			}
		}()
		v, err := rt.handler(ctx, ev)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sless-runtime: handler error (request %s): %+v\n", rid, err)
			done <- outcome{errorResult(http.StatusInternalServerError, err.Error()), err}
			return
		}
		if inv.started() {
			done <- outcome{}
			return
		}
		res, err := mapResult(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sless-runtime: cannot serialize result (request %s): %v\n", rid, err)
			done <- outcome{errorResult(http.StatusInternalServerError, "cannot serialize result: "+err.Error()), nil}
			return
		}
		done <- outcome{res, nil}
	}()
	select {
	case o := <-done:
		// Whatever the handler's goroutine still holds, nothing more reaches out from here on.
		inv.cancel(context.Canceled)
		if inv.started() {
			return result{}, true, o.err
		}
		return o.res, false, nil
	case <-timedOut:
		fmt.Fprintf(os.Stderr, "sless-runtime: request %s timed out after %ss\n", rid, rt.timeoutLabel)
		return errorResult(http.StatusGatewayTimeout, "function timed out after "+rt.timeoutLabel+"s"), false, nil
	case <-inv.Done():
		inv.cancel(context.Canceled)
		if inv.started() {
			return result{}, true, context.Canceled
		}
		if errors.Is(inv.Err(), context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "sless-runtime: request %s timed out after %ss\n", rid, rt.timeoutLabel)
			return errorResult(http.StatusGatewayTimeout, "function timed out after "+rt.timeoutLabel+"s"), false, nil
		}
		return errorResult(499, "request cancelled"), false, nil
	}
}

// --- HTTP ----------------------------------------------------------------------------------------

var healthBody = []byte(`{"status":"ok"}`)

func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

func isJSONType(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

func isTextType(mt string) bool {
	switch mt {
	case "", "application/x-www-form-urlencoded", "application/xml", "application/javascript", "application/graphql":
		return true
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+xml")
}

func decodeBody(raw []byte, contentType string) (any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	mt := mediaType(contentType)
	if (isJSONType(mt) || isTextType(mt)) && utf8.Valid(raw) {
		if isJSONType(mt) {
			var v any
			if err := json.Unmarshal(raw, &v); err == nil {
				return v, false
			}
		}
		return string(raw), false
	}
	return base64.StdEncoding.EncodeToString(raw), true
}

func (rt *runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	uri := r.RequestURI
	path, rawQuery := uri, ""
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		path, rawQuery = uri[:i], uri[i+1:]
	}
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") { // absolute-form target
		path, rawQuery = r.URL.EscapedPath(), r.URL.RawQuery
	}
	if r.Method == http.MethodGet && path == "/healthz" {
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write(healthBody)
		return
	}
	if r.ContentLength > MaxBodyBytes {
		writeResult(w, errorResult(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes)))
		return
	}
	var raw []byte
	var err error
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if r.ContentLength > 0 {
		raw = make([]byte, r.ContentLength)
		_, err = io.ReadFull(body, raw)
	} else {
		raw, err = io.ReadAll(body)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeResult(w, errorResult(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes)))
		} else {
			writeResult(w, errorResult(http.StatusBadRequest, "cannot read request body: "+err.Error()))
		}
		return
	}
	headers := make(map[string]string, len(r.Header)+1)
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	query, _ := url.ParseQuery(rawQuery)
	decoded, isB64 := decodeBody(raw, headers["content-type"])
	ev := Event{
		Method:          r.Method,
		Path:            path,
		Query:           Query(query),
		Headers:         headers,
		Body:            decoded,
		IsBase64Encoded: isB64,
		raw:             raw,
	}
	res, streamed, err := rt.invoke(context.WithValue(r.Context(), requestKey{}, r), ev, w)
	if !streamed {
		writeResult(w, res)
		return
	}
	if err != nil {
		// The status went out with the stream: cutting the connection is the only way left to say
		// that the body is incomplete.
		panic(http.ErrAbortHandler)
	}
}

func writeResult(w http.ResponseWriter, res result) {
	if res.status < 100 || res.status > 999 {
		res = errorResult(http.StatusInternalServerError, fmt.Sprintf("invalid statusCode %d", res.status))
	}
	h := w.Header()
	for k, vs := range res.headers {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Content-Length" || ck == "Transfer-Encoding" { // framing is the runtime's job
			continue
		}
		for _, v := range vs {
			h[ck] = append(h[ck], v)
		}
	}
	h.Set("content-length", strconv.Itoa(len(res.payload)))
	w.WriteHeader(res.status)
	_, _ = w.Write(res.payload)
}

func (rt *runtime) serve() int {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	// SLESS_HOST: the local platform binds to loopback so only its proxy reaches the function.
	srv := &http.Server{
		Addr:              os.Getenv("SLESS_HOST") + ":" + port,
		Handler:           rt,
		ReadHeaderTimeout: 60 * time.Second,
		IdleTimeout:       65 * time.Second,
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if os.Getenv("SLESS_LIFELINE") == "stdin" {
		// The parent holds our stdin open; EOF means it died (even by SIGKILL): exit, never linger.
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
	}
	// SLESS_SOCKET: a unix socket instead of a port. The sandboxed local platform gives each function
	// its own network namespace, where no port is reachable from outside; the socket file is.
	network, address, where := "tcp", srv.Addr, "port "+port
	if socketPath := os.Getenv("SLESS_SOCKET"); socketPath != "" {
		network, address, where = "unix", socketPath, "socket "+socketPath
	}
	listener, err := net.Listen(network, address)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sless-runtime: cannot listen on %s: %v\n", where, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sless-runtime: %s listening on %s\n", Entrypoint, where)
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "sless-runtime: serving on %s failed: %v\n", where, err)
		return 1
	}
	return 0
}

// --- one-shot --------------------------------------------------------------------------------------

func (rt *runtime) oneShot(raw string) int {
	var body any
	if err := json.Unmarshal([]byte(raw), &body); err != nil {
		fmt.Fprintf(os.Stderr, "sless-runtime: SLESS_EVENT is not valid JSON: %v\n", err)
		return 2
	}
	ev := Event{
		Method:  http.MethodPost,
		Path:    "/",
		Query:   Query{},
		Headers: map[string]string{"content-type": "application/json"},
		Body:    body,
		raw:     []byte(raw),
	}
	stdout, atLineStart := trackStdout()
	buf := &bufferWriter{header: http.Header{}}
	res, streamed, err := rt.invoke(context.Background(), ev, buf)
	if streamed && err != nil {
		res = errorResult(http.StatusInternalServerError, err.Error())
	} else if streamed {
		res = result{status: buf.status, payload: buf.body}
		if utf8.Valid(buf.body) {
			res.shot = jsonString(string(buf.body))
		} else {
			res.shot = jsonString(base64.StdEncoding.EncodeToString(buf.body))
		}
	}
	os.Stdout = stdout
	newline := ""
	if !atLineStart() {
		newline = "\n"
	}
	shot := res.shot
	if len(shot) == 0 {
		shot = json.RawMessage("null")
	}
	line, _ := marshalJSON(struct {
		StatusCode int             `json:"statusCode"`
		Body       json.RawMessage `json:"body"`
	}{res.status, shot})
	fmt.Fprintf(os.Stdout, "%sSLESS_RESULT %s\n", newline, line)
	if res.status < 500 {
		return 0
	}
	return 1
}

// trackStdout routes os.Stdout through a pipe while the one-shot handler runs, so that the
// SLESS_RESULT line can start on a fresh line even if the handler printed without a newline.
// It returns the real stdout and a func that stops tracking and reports whether output ended
// at a line start.
func trackStdout() (*os.File, func() bool) {
	orig := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		return orig, func() bool { return true }
	}
	os.Stdout = w
	done := make(chan bool, 1)
	go func() {
		last := byte('\n')
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = orig.Write(buf[:n])
				last = buf[n-1]
			}
			if err != nil {
				break
			}
		}
		done <- last == '\n'
	}()
	return orig, func() bool {
		_ = w.Close()
		return <-done
	}
}
