package sless

// Streamed answers: a handler that asks for Stream(ctx) writes its response as it produces it.
// The headers go out with the first Write (or Flush, or WriteHeader), and every Write is flushed
// to the client at once. A Write blocks while the client reads slower than the handler writes.
// The function's timeout covers the time until the stream starts; from then on the ctx ends only
// when the client goes away (or the handler returns), so a healthy stream may outlast the timeout.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// ErrStreamClosed is returned by a Write after the answer is over: the client went away, the
// timeout passed before the stream started, or the handler already returned.
var ErrStreamClosed = errors.New("sless: the stream is closed")

// StreamWriter is the writer of a streamed answer. It is an http.ResponseWriter and an
// http.Flusher, so code written for net/http can write to it.
type StreamWriter struct {
	inv *invocation
}

// Stream returns the writer of the invocation's streamed answer. The handler's return value is
// ignored once the stream has started, except that a non-nil error cuts the response short (the
// client sees an incomplete body, as the status has already gone out). Outside an invocation
// (a unit test of a handler) every Write fails with ErrStreamClosed.
func Stream(ctx context.Context) *StreamWriter {
	inv, _ := ctx.Value(streamKey{}).(*invocation)
	return &StreamWriter{inv: inv}
}

// Header is the header map sent when the stream starts; changes after that have no effect.
func (s *StreamWriter) Header() http.Header {
	if s.inv == nil {
		return http.Header{}
	}
	return s.inv.header
}

// WriteHeader starts the stream with that status and the headers set so far.
func (s *StreamWriter) WriteHeader(status int) {
	if s.inv != nil {
		_ = s.inv.commit(status)
	}
}

// Write sends p as one chunk, at once.
func (s *StreamWriter) Write(p []byte) (int, error) {
	if s.inv == nil {
		return 0, ErrStreamClosed
	}
	return s.inv.write(p)
}

// WriteString sends s as one chunk, at once.
func (s *StreamWriter) WriteString(text string) (int, error) { return s.Write([]byte(text)) }

// Flush starts the stream if it has not started; every Write is flushed already.
func (s *StreamWriter) Flush() { s.WriteHeader(http.StatusOK) }

type streamKey struct{}

type requestKey struct{}

// Upgrade hands the invocation's connection to the handler, for a protocol of its own such as a
// WebSocket: w and r are net/http's, so a library accepts the connection from them (for example
// github.com/coder/websocket's Accept(w, r, nil), or gorilla/websocket's Upgrader), and w can be
// hijacked. From then on the runtime writes nothing, the timeout no longer applies, and the
// handler's return value is ignored. ok is false outside an HTTP invocation (one-shot mode, tests).
func Upgrade(ctx context.Context) (w http.ResponseWriter, r *http.Request, ok bool) {
	inv, _ := ctx.Value(streamKey{}).(*invocation)
	r, _ = ctx.Value(requestKey{}).(*http.Request)
	if inv == nil || r == nil {
		return nil, nil, false
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.state == streamClosed {
		return nil, nil, false
	}
	// Started, as a stream is: the timeout ends nothing, and the runtime answers nothing.
	inv.state, inv.status = streamStarted, http.StatusSwitchingProtocols
	return inv.out, r, true
}

const (
	streamOpen = iota
	streamStarted
	streamClosed
)

// invocation is one handler call's context and stream. Its Done closes when the client goes away,
// when the timeout passes before the stream started, or when the invocation is over.
type invocation struct {
	parent   context.Context
	deadline time.Time
	out      http.ResponseWriter
	header   http.Header

	mu     sync.Mutex
	state  int
	status int
	err    error
	done   chan struct{}
}

func newInvocation(parent context.Context, deadline time.Time, out http.ResponseWriter) *invocation {
	return &invocation{parent: parent, deadline: deadline, out: out, header: http.Header{}, done: make(chan struct{})}
}

// Deadline is the function's timeout until the stream starts, and none after: a stream runs as
// long as it keeps sending (the proxy bounds the gaps between chunks).
func (c *invocation) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == streamStarted {
		return time.Time{}, false
	}
	return c.deadline, true
}

func (c *invocation) Done() <-chan struct{} { return c.done }

func (c *invocation) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *invocation) Value(key any) any {
	if _, ok := key.(streamKey); ok {
		return c
	}
	return c.parent.Value(key)
}

// cancelLocked ends the context with err (once) and refuses further writes.
func (c *invocation) cancelLocked(err error) {
	c.state = streamClosed
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

func (c *invocation) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelLocked(err)
}

// expire is the timeout: it ends an invocation that has not started streaming, and reports whether
// it did (a started stream is no longer bound by it).
func (c *invocation) expire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == streamStarted {
		return false
	}
	c.cancelLocked(context.DeadlineExceeded)
	return true
}

func (c *invocation) started() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == streamStarted || c.status != 0
}

func (c *invocation) commit(status int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commitLocked(status)
}

func (c *invocation) commitLocked(status int) error {
	switch c.state {
	case streamClosed:
		return ErrStreamClosed
	case streamStarted:
		return nil
	}
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError
	}
	h := c.out.Header()
	for k, vs := range c.header {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Content-Length" || ck == "Transfer-Encoding" { // framing is the runtime's job
			continue
		}
		h[ck] = append(h[ck][:0:0], vs...)
	}
	if h.Get("content-type") == "" {
		h.Set("content-type", "application/octet-stream")
	}
	c.state, c.status = streamStarted, status
	c.out.WriteHeader(status)
	if f, ok := c.out.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// write holds the lock while it writes, so that the runtime cannot end the answer under it; a
// write to a client that went away fails soon, and the lock with it.
func (c *invocation) write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.commitLocked(http.StatusOK); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.out.Write(p)
	if err != nil {
		c.cancelLocked(context.Canceled)
		return n, ErrStreamClosed
	}
	if f, ok := c.out.(http.Flusher); ok {
		f.Flush()
	}
	return n, nil
}

// watch ends the invocation when the parent ends (the client went away) or the timeout passes
// before the stream started, until stop is closed.
func (c *invocation) watch(stop <-chan struct{}) (timedOut <-chan struct{}) {
	expired := make(chan struct{})
	go func() {
		timer := time.NewTimer(time.Until(c.deadline))
		defer timer.Stop()
		deadline := timer.C
		for {
			select {
			case <-stop:
				return
			case <-c.done:
				return
			case <-c.parent.Done():
				c.cancel(context.Canceled)
				return
			case <-deadline:
				// Once: a started stream is bound by the client and the handler only.
				deadline = nil
				if c.expire() {
					close(expired)
				}
			}
		}
	}()
	return expired
}

// bufferWriter collects a streamed answer in one-shot mode, where there is no client to stream to.
type bufferWriter struct {
	header http.Header
	status int
	body   []byte
}

func (b *bufferWriter) Header() http.Header { return b.header }

func (b *bufferWriter) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.body = append(b.body, p...)
	return len(p), nil
}
