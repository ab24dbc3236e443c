// Package sless is the Go runtime of sless: the types a Go function uses and the HTTP server
// (Serve) that a generated main package runs. Stdlib only.
//
// A function is a package with
//
//	func Handle(ctx context.Context, event sless.Event) (any, error)
//
// (any result type works: Serve is generic). The result is mapped like in every runtime: a
// Response (or *Response, or a map with a numeric "statusCode") becomes that HTTP response,
// anything else becomes 200 with a JSON body; a non-nil error (or a panic) becomes
// 500 {"error": message}.
package sless

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// Event is the request as seen by the handler. Its JSON form is the same in every runtime.
type Event struct {
	Method string `json:"method"`
	// Path is the request path after the platform's /fn/{ns}/{name} prefix, e.g. "/" or "/items/1".
	Path  string `json:"path"`
	Query Query  `json:"query"`
	// Headers has lower-cased names; repeated headers are joined with ", ".
	Headers map[string]string `json:"headers"`
	// Body is the parsed JSON value (JSON content types), a string (text), a base64 string
	// (binary, IsBase64Encoded=true) or nil (empty body). BodyBytes returns the raw bytes.
	Body            any  `json:"body"`
	IsBase64Encoded bool `json:"isBase64Encoded"`

	raw []byte
}

// Header returns the value of a request header (case-insensitive name).
func (e Event) Header(name string) string {
	return e.Headers[strings.ToLower(name)]
}

// BodyBytes returns the request body as bytes (the raw bytes when the event came from HTTP).
func (e Event) BodyBytes() []byte {
	if e.raw != nil {
		return e.raw
	}
	switch b := e.Body.(type) {
	case nil:
		return nil
	case string:
		if e.IsBase64Encoded {
			out, err := base64.StdEncoding.DecodeString(b)
			if err == nil {
				return out
			}
		}
		return []byte(b)
	default:
		out, _ := marshalJSON(b)
		return out
	}
}

// DecodeJSON decodes the body (a JSON request body, or a JSON text) into v.
func (e Event) DecodeJSON(v any) error {
	if s, ok := e.Body.(string); ok && !e.IsBase64Encoded {
		return json.Unmarshal([]byte(s), v)
	}
	if e.raw != nil && !e.IsBase64Encoded {
		return json.Unmarshal(e.raw, v)
	}
	data, err := json.Marshal(e.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Query holds the query string. In JSON a key maps to a string, or to an array of strings when
// the key is repeated (like the other runtimes).
type Query map[string][]string

// Get returns the first value of key, or "".
func (q Query) Get(key string) string {
	if vs := q[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// MarshalJSON encodes single values as strings and repeated keys as arrays.
func (q Query) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(q))
	for k, vs := range q {
		if len(vs) == 1 {
			m[k] = vs[0]
		} else {
			m[k] = vs
		}
	}
	return marshalJSON(m)
}

// UnmarshalJSON accepts string and string-array values.
func (q *Query) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	out := make(Query, len(m))
	for k, raw := range m {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			out[k] = []string{s}
			continue
		}
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil {
			return err
		}
		out[k] = ss
	}
	*q = out
	return nil
}

// Response is an explicit HTTP response. A string Body is sent as is (text/plain unless a
// content-type header is given), []byte as is (application/octet-stream), any other non-nil
// value as JSON. With IsBase64Encoded, a string Body is base64-decoded to bytes first.
//
// MultiValueHeaders adds headers that must be sent as several lines (e.g. Set-Cookie); they are
// sent after Headers' value for the same name.
type Response struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Body              any                 `json:"body,omitempty"`
	IsBase64Encoded   bool                `json:"isBase64Encoded,omitempty"`
}

// Context describes the invocation; get it with FromContext.
type Context struct {
	FunctionName string `json:"functionName"`
	Namespace    string `json:"namespace"`
	RequestID    string `json:"requestId"`
	// DeadlineMs is the epoch-millisecond deadline (now + SLESS_TIMEOUT_SEC at invocation).
	DeadlineMs int64 `json:"deadlineMs"`
}

// Deadline returns DeadlineMs as a time.Time. The ctx passed to the handler carries the same deadline.
func (c Context) Deadline() time.Time {
	return time.UnixMilli(c.DeadlineMs)
}

type contextKey struct{}

// FromContext returns the invocation context stored in ctx by the runtime (zero Context if none).
func FromContext(ctx context.Context) Context {
	c, _ := ctx.Value(contextKey{}).(Context)
	return c
}

// WithContext returns a ctx carrying c (useful in tests of a handler).
func WithContext(ctx context.Context, c Context) context.Context {
	return context.WithValue(ctx, contextKey{}, c)
}
