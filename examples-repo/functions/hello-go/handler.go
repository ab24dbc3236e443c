// A Go function: an exported func(ctx, sless.Event) (any, error) in a non-main package. The runtime
// provides main, /healthz and the response mapping; `go build` runs at deploy time.
package handler

import (
	"context"
	"os"

	sless "sless.dev/runtime"
)

func Handle(ctx context.Context, event sless.Event) (any, error) {
	name := event.Query.Get("name")
	if name == "" {
		name = "world"
	}
	info := sless.FromContext(ctx)
	return map[string]any{
		"message":  os.Getenv("GREETING") + ", " + name + "!",
		"function": info.FunctionName,
		"path":     event.Path,
	}, nil
}
