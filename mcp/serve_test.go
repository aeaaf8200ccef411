package mcp_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/mcp"
)

// serveInMemory serves tools to an SDK client over an in-memory pipe.
func serveInMemory(t *testing.T, tools []mcp.ServedTool) *sdk.ClientSession {
	t.Helper()
	svc, err := mcp.NewService("test", "1", tools)
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.ServeStdio(ctx, serverIn, serverOut) }()
	t.Cleanup(func() { cancel(); <-served })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestService(t *testing.T) {
	var running, most atomic.Int32
	cancelled := make(chan struct{}, 1)
	object := func(props map[string]any, required ...any) map[string]any {
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	cs := serveInMemory(t, []mcp.ServedTool{
		{Spec: llm.ToolSpec{Name: "add", Description: "Adds", Parameters: object(map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "integer"}}, "a", "b")},
			Call: func(_ context.Context, args map[string]any) (string, error) {
				return `{"sum": ` + strconv.FormatInt(args["a"].(int64)+args["b"].(int64), 10) + `}`, nil
			}},
		{Spec: llm.ToolSpec{Name: "fail", Parameters: object(map[string]any{})},
			Call: func(context.Context, map[string]any) (string, error) { return "", errors.New("it failed") }},
		{Spec: llm.ToolSpec{Name: "slow", Parameters: object(map[string]any{})},
			Call: func(ctx context.Context, _ map[string]any) (string, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				select {
				case <-ctx.Done():
					cancelled <- struct{}{}
					return "", ctx.Err()
				case <-time.After(300 * time.Millisecond):
					return "slept", nil
				}
			}},
	})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != `{"sum": 5}` || res.StructuredContent.(map[string]any)["sum"] != 5.0 {
		t.Errorf("add: %+v", res)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": "2", "b": 3}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*sdk.TextContent).Text, "invalid arguments for tool add: arguments.a:") {
		t.Errorf("bad arguments: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "fail"})
	if err != nil || !res.IsError || res.Content[0].(*sdk.TextContent).Text != "it failed" {
		t.Errorf("fail: %+v %v", res, err)
	}
	// calls run side by side
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow"})
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if most.Load() != 2 {
		t.Errorf("at most %d calls ran at once, want 2", most.Load())
	}
	// a cancelled call cancels the tool's context
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "slow"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Error("the tool's context was not cancelled")
	}
}
