package mcp_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain makes the test binary a small MCP server of its own when its
// first argument is "mcp-test-server": a stdio server whose tools die,
// sleep and answer, for what the real servers cannot be made to do
// (exit in the middle of a call) and for machines without node.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mcp-test-server" {
		serveTestServer()
		return
	}
	os.Exit(m.Run())
}

func serveTestServer() {
	s := sdk.NewServer(&sdk.Implementation{Name: "test-server", Version: "1"}, nil)
	object := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	s.AddTool(&sdk.Tool{Name: "say", Description: "Says text", InputSchema: object}, func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "said " + string(r.Params.Arguments)}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: object}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it went wrong"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "die", InputSchema: object}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "fatal: the test server dies")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "sleep", InputSchema: object}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "slept"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "links", InputSchema: object}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.ResourceLink{URI: "file:///tmp/a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "a file"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "the note"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://blob", Blob: []byte{1, 2, 3}}},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte{1, 2}},
		}}, nil
	})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
