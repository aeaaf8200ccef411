package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workspace"
)

// sessionServers are the MCP servers a client passed for one session
// (session/new or session/load), connected, and their tools.
type sessionServers struct {
	servers []*mcp.Server
	names   []string
	tools   []agent.Tool
}

// close closes every server.
func (s *sessionServers) close() {
	if s == nil {
		return
	}
	for _, srv := range s.servers {
		srv.Close()
	}
}

// connectMCP starts (stdio) or connects to (http) the MCP servers of a
// session/new or session/load request, each checked against the run's
// policy first. On an error every server already started is closed and
// the JSON-RPC error names the server.
func (a *agentSide) connectMCP(ctx context.Context, method string, servers []sdk.McpServer) (*sessionServers, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	if a.cfg.AttachTools == nil || a.cfg.Policy == nil {
		return nil, rpcError(codeInvalidParams, method, "this agent takes no MCP servers (mcpServers must be empty)")
	}
	out := &sessionServers{}
	owner := map[string]string{}
	for i, srv := range servers {
		spec, err := a.mcpSpec(srv)
		if err != nil {
			out.close()
			return nil, rpcError(codeInvalidParams, method, "mcpServers[%d]: %v", i, err)
		}
		s, err := mcp.Connect(ctx, spec, a.cfg.Policy)
		if err != nil {
			out.close()
			if !strings.HasPrefix(err.Error(), "mcp server ") {
				err = fmt.Errorf("mcp server '%s': %w", spec.Name, err)
			}
			code := codeInternalError
			if errors.Is(err, workspace.ErrNotAllowed) {
				code = codeInvalidParams
			}
			return nil, rpcError(code, method, "%v", err)
		}
		out.servers = append(out.servers, s)
		out.names = append(out.names, spec.Name)
		for _, t := range s.Tools() {
			if other, dup := owner[t.Name()]; dup {
				out.close()
				return nil, rpcError(codeInvalidParams, method, "mcp server '%s' offers tool '%s' as server '%s' does: a turn's tools need distinct names", spec.Name, t.Name(), other)
			}
			owner[t.Name()] = spec.Name
			out.tools = append(out.tools, t)
		}
	}
	return out, nil
}

// mcpSpec maps one of the client's MCP servers to skein's: a stdio
// server's command and arguments, an http server's URL. Environment
// variables and headers may hold tokens: they are passed as secrets
// (revealed only in the server's environment, on the wire) and added to
// the store's redactor, so nothing a server echoes stores them. skein's
// MCP client speaks stdio and Streamable HTTP; an sse server is refused.
func (a *agentSide) mcpSpec(srv sdk.McpServer) (mcp.Spec, error) {
	red := a.cfg.Store.Redactor()
	switch {
	case srv.Stdio != nil:
		s := srv.Stdio
		if s.Name == "" {
			return mcp.Spec{}, errors.New("a server needs a name")
		}
		if s.Command == "" {
			return mcp.Spec{}, fmt.Errorf("mcp server '%s': command is empty", s.Name)
		}
		env := secrets(red, s.Env, func(e sdk.EnvVariable) (string, string) { return e.Name, e.Value })
		return mcp.Spec{Name: s.Name, Command: append([]string{s.Command}, s.Args...), SecretEnv: env}, nil
	case srv.Http != nil:
		h := srv.Http
		if h.Name == "" {
			return mcp.Spec{}, errors.New("a server needs a name")
		}
		headers := secrets(red, h.Headers, func(h sdk.HttpHeader) (string, string) { return h.Name, h.Value })
		return mcp.Spec{Name: h.Name, URL: h.Url, SecretHeaders: headers}, nil
	case srv.Sse != nil:
		return mcp.Spec{}, fmt.Errorf("mcp server '%s': the sse transport is not supported (skein's MCP client speaks stdio and Streamable HTTP, type \"http\")", srv.Sse.Name)
	}
	return mcp.Spec{}, errors.New("unknown server type (skein takes stdio and http servers)")
}

// secrets returns the name/value pairs of items (a server's env or
// headers) as secrets, nil for none, and adds each value to red.
func secrets[T any](red *message.Redactor, items []T, pair func(T) (name, value string)) map[string]workspace.Secret {
	if len(items) == 0 {
		return nil
	}
	out := make(map[string]workspace.Secret, len(items))
	for _, it := range items {
		name, value := pair(it)
		out[name] = workspace.NewSecret(name, value)
		red.Add(name, value)
	}
	return out
}
