package mcp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/schema"
)

// ServedTool is a tool a Service offers to MCP clients.
type ServedTool struct {
	// Spec is the tool's name, description and parameter schema (a JSON
	// Schema of type object).
	Spec llm.ToolSpec
	// Call runs the tool with arguments already validated against
	// Spec.Parameters. Its text is the result; an error becomes a result
	// with isError set and the error's text. ctx is cancelled when the
	// client cancels the call or goes away.
	Call func(ctx context.Context, args map[string]any) (string, error)
}

// Service is an MCP server offering tools: `skein mcp` serves a script's
// functions with it.
type Service struct {
	srv *sdk.Server
}

// NewService returns a Service offering tools under the name and version
// it gives in the handshake. Every tool's schema is compiled here; one
// that does not compile is an error naming the tool.
func NewService(name, version string, tools []ServedTool) (*Service, error) {
	srv := sdk.NewServer(&sdk.Implementation{Name: name, Version: version}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	for _, t := range tools {
		params := t.Spec.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		args, err := schema.Compile(params)
		if err != nil {
			return nil, fmt.Errorf("tool %s: parameters: %v", quote(t.Spec.Name), err)
		}
		srv.AddTool(&sdk.Tool{Name: t.Spec.Name, Description: t.Spec.Description, InputSchema: params}, handler(t, args))
	}
	return &Service{srv: srv}, nil
}

// handler is the tools/call handler of t.
func handler(t ServedTool, args *schema.Schema) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		in := map[string]any{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			v, err := jsonvalue.DecodeObject(raw)
			if err != nil {
				return failed(fmt.Sprintf("invalid arguments for tool %s: %v", t.Spec.Name, err)), nil
			}
			in = v
		}
		if err := args.Validate("arguments", in); err != nil {
			return failed(fmt.Sprintf("invalid arguments for tool %s: %v", t.Spec.Name, err)), nil
		}
		out, err := t.Call(ctx, in)
		if err != nil {
			return failed(err.Error()), nil
		}
		res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}
		if v, err := jsonvalue.Decode([]byte(out)); err == nil {
			if _, ok := v.(map[string]any); ok {
				res.StructuredContent = json.RawMessage(out)
			}
		}
		return res, nil
	}
}

func failed(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// ServeStdio serves one client over in and out (newline-delimited
// JSON-RPC, the stdio transport) until the client closes in or ctx is
// done.
func (s *Service) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	err := s.srv.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler serves the Streamable HTTP transport at every path, to
// requests bearing token (Authorization: Bearer TOKEN).
func (s *Service) Handler(token string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, nil)
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="skein"`)
			http.Error(w, "missing or wrong bearer token (send Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
