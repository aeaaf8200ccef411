package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/schema"
	"github.com/skein-dev/skein/sessions/message"
)

// Tool is one tool of a server. It is an agent tool: Spec, ArgsSchema,
// Run and RunContent are what the agent loop calls.
type Tool struct {
	server      *Server
	name        string // the prefix and the MCP name, made a valid tool name
	mcpName     string
	description string
	params      map[string]any
	args        *schema.Schema
}

// newTool makes a Tool of a listed tool, compiling its input schema.
func newTool(s *Server, t *sdk.Tool, prefix string) (*Tool, error) {
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	if t.InputSchema != nil {
		data, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %v", quote(t.Name), err)
		}
		if params, err = jsonvalue.DecodeObject(data); err != nil {
			return nil, fmt.Errorf("tool %s: inputSchema: %v", quote(t.Name), err)
		}
	}
	args, err := schema.Compile(params)
	if err != nil {
		return nil, fmt.Errorf("tool %s: inputSchema: %v", quote(t.Name), err)
	}
	return &Tool{server: s, name: prefix + toolName(t.Name), mcpName: t.Name, description: t.Description, params: params, args: args}, nil
}

// toolName makes an MCP tool name a valid model tool name: characters
// other than letters, digits, '_' and '-' become '_'.
func toolName(name string) string {
	if name == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if validToolRune(r) {
			return r
		}
		return '_'
	}, name)
}

func validToolRune(r rune) bool {
	return r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func checkToolName(name string) error {
	for _, r := range name {
		if !validToolRune(r) {
			return fmt.Errorf("tool name %q may only have letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

// Name returns the tool's name as the model sees it: the server's prefix
// and its MCP name.
func (t *Tool) Name() string { return t.name }

// MCPName returns the name the server gave the tool.
func (t *Tool) MCPName() string { return t.mcpName }

// Server returns the tool's server.
func (t *Tool) Server() *Server { return t.server }

// Spec returns the tool's name, description (as the server gave it) and
// input schema.
func (t *Tool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Description: t.description, Parameters: t.params}
}

// ArgsSchema returns the input schema, compiled.
func (t *Tool) ArgsSchema() *schema.Schema { return t.args }

// Run calls the tool with arguments already validated against its
// schema and returns the result's text.
func (t *Tool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	r, err := t.call(ctx, call.Arguments, nil)
	if err != nil {
		return "", err
	}
	return r.Text(), nil
}

// RunContent calls the tool with arguments already validated against its
// schema and returns the result's content blocks; progress receives the
// server's progress notifications (total 0: unknown).
func (t *Tool) RunContent(ctx context.Context, call message.ToolCall, progress func(done, total float64, message string)) ([]message.Block, error) {
	var onProgress func(Progress)
	if progress != nil {
		onProgress = func(p Progress) { progress(p.Progress, p.Total, p.Message) }
	}
	r, err := t.call(ctx, call.Arguments, onProgress)
	if err != nil {
		return nil, err
	}
	return r.Content, nil
}

func (t *Tool) call(ctx context.Context, args map[string]any, progress func(Progress)) (*Result, error) {
	return t.server.call(ctx, t, args, progress)
}
