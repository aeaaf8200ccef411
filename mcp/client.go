package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/workspace"
)

// DefaultTimeout bounds each request to a server (the handshake, the
// tool listing, each call) when Spec.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// Spec says how to reach one MCP server. Exactly one of Command and URL
// is set.
type Spec struct {
	// Name names the server in tool clashes and errors (default: the
	// name the server gives in its handshake, else the program's base
	// name or the URL's host).
	Name string
	// Command is the argv of a stdio server; Command[0] must be allowed
	// by the policy's command allowlist.
	Command []string
	// Dir is a stdio server's working directory ("": the workspace root;
	// otherwise a directory in write scope, as for exec.run).
	Dir string
	// URL is a Streamable HTTP endpoint; its host must be allowed by the
	// policy's network allowlist.
	URL string
	// Env and SecretEnv are added to a stdio server's environment, which
	// holds PATH and HOME and the variables of skein's environment that
	// the environment allowlist names (Policy.AllowedEnviron); every name
	// must be on the allowlist. SecretEnv values are revealed only there.
	Env       map[string]string
	SecretEnv map[string]workspace.Secret
	// Headers and SecretHeaders are sent with every HTTP request to URL's
	// origin (never to another one); SecretHeaders values are revealed
	// only on the wire.
	Headers       map[string]string
	SecretHeaders map[string]workspace.Secret
	// Timeout bounds each request (0: DefaultTimeout).
	Timeout time.Duration
	// Prefix is put before every tool name ("fs_" makes read_file
	// fs_read_file), so that two servers offering one name can be used
	// together.
	Prefix string
}

// check checks the spec's shape; the policy is checked by Connect.
func (s *Spec) check() error {
	switch {
	case s.Command == nil && s.URL == "":
		return errors.New("give command (a stdio server) or url (a Streamable HTTP server)")
	case s.Command != nil && s.URL != "":
		return errors.New("give command or url, not both")
	case s.Command != nil && (len(s.Command) == 0 || s.Command[0] == ""):
		return errors.New("command is empty")
	case s.URL == "" && (len(s.Headers) > 0 || len(s.SecretHeaders) > 0):
		return errors.New("headers are for an url server; a stdio server takes env")
	case s.Command == nil && (len(s.Env) > 0 || len(s.SecretEnv) > 0):
		return errors.New("env is for a stdio server; an url server takes headers")
	case s.Timeout < 0:
		return fmt.Errorf("timeout must be positive, got %v", s.Timeout)
	}
	if s.Prefix != "" {
		if err := checkToolName(s.Prefix + "x"); err != nil {
			return fmt.Errorf("prefix %q may only have letters, digits, '_' and '-'", s.Prefix)
		}
	}
	return nil
}

// label is the name errors use before the handshake tells the server's.
func (s *Spec) label() string {
	if s.Name != "" {
		return s.Name
	}
	if s.Command != nil {
		return filepath.Base(s.Command[0])
	}
	if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return "mcp"
}

// Progress is one progress notification of a running call.
type Progress struct {
	Progress float64
	Total    float64 // 0: unknown
	Message  string
}

// Server is a connected MCP server. It is safe for concurrent use.
type Server struct {
	name    string
	timeout time.Duration
	session *sdk.ClientSession
	proc    *process // nil for an HTTP server
	tools   []*Tool
	byName  map[string]*Tool // exposed names, then MCP names

	tokens   atomic.Uint64
	mu       sync.Mutex
	progress map[string]func(Progress) // by progress token
	closed   bool

	closeOnce sync.Once
	closeErr  error
}

// Connect checks spec against policy, starts the server (stdio) or
// connects to it (HTTP), runs the initialize handshake and lists its
// tools. Nothing starts and nothing connects when the policy refuses;
// such an error matches workspace.ErrNotAllowed. ctx bounds the
// connection's set-up only: the server lives until Close.
func Connect(ctx context.Context, spec Spec, policy *workspace.Policy) (*Server, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	s := &Server{name: spec.label(), timeout: spec.Timeout, progress: map[string]func(Progress){}}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "skein", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
	})
	var transport sdk.Transport
	if spec.Command != nil {
		proc, err := startProcess(policy, &spec)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", quote(s.name), err)
		}
		s.proc = proc
		transport = &sdk.IOTransport{Reader: &sniffer{r: proc.stdout, onProgress: s.onProgress}, Writer: proc.stdin}
	} else {
		if err := policy.CheckURL(spec.URL); err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", quote(s.name), err)
		}
		hc := headerClient(policy, &spec)
		hc.Transport = &sniffing{next: hc.Transport, onProgress: s.onProgress}
		transport = &sdk.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxRetries: -1}
	}
	setup, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	session, err := client.Connect(setup, transport, nil)
	if err != nil {
		s.stopProcess()
		return nil, s.requestError("initialize", ctx, setup, err)
	}
	s.session = session
	if spec.Name == "" {
		if init := session.InitializeResult(); init != nil && init.ServerInfo != nil && init.ServerInfo.Name != "" {
			s.name = init.ServerInfo.Name
		}
	}
	if err := s.listTools(setup, ctx, spec.Prefix); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// listTools lists the server's tools, all pages, and compiles their
// schemas.
func (s *Server) listTools(ctx, parent context.Context, prefix string) error {
	s.byName = map[string]*Tool{}
	for t, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			return s.requestError("tools/list", parent, ctx, err)
		}
		tool, err := newTool(s, t, prefix)
		if err != nil {
			return fmt.Errorf("mcp server %s: %w", quote(s.name), err)
		}
		if _, dup := s.byName[tool.name]; dup {
			return fmt.Errorf("mcp server %s lists tool %s twice", quote(s.name), quote(tool.name))
		}
		s.tools = append(s.tools, tool)
		s.byName[tool.name] = tool
	}
	for _, t := range s.tools {
		if _, taken := s.byName[t.mcpName]; !taken {
			s.byName[t.mcpName] = t
		}
	}
	return nil
}

// Name returns the server's name.
func (s *Server) Name() string { return s.name }

// Tools returns the server's tools, in the order it listed them.
func (s *Server) Tools() []*Tool { return slices.Clone(s.tools) }

// Tool returns the tool called name: its name with the prefix, or its
// MCP name.
func (s *Server) Tool(name string) (*Tool, error) {
	if t, ok := s.byName[name]; ok {
		return t, nil
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.name
	}
	return nil, fmt.Errorf("mcp server %s has no tool %s (tools: %s)", quote(s.name), quote(name), strings.Join(names, ", "))
}

// Call calls the tool called name (see Tool) with args, after validating
// them against its input schema. progress, if not nil, receives the
// server's progress notifications for this call. A result with isError
// set is returned with a *ToolError.
func (s *Server) Call(ctx context.Context, name string, args map[string]any, progress func(Progress)) (*Result, error) {
	t, err := s.Tool(name)
	if err != nil {
		return nil, err
	}
	if err := t.args.Validate("arguments", args); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %s: %v", t.name, err)
	}
	return t.call(ctx, args, progress)
}

// call sends tools/call for t.
func (s *Server) call(ctx context.Context, t *Tool, args map[string]any, progress func(Progress)) (*Result, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	params := &sdk.CallToolParams{Name: t.mcpName, Arguments: args}
	if progress != nil {
		token := "skein-" + strconv.FormatUint(s.tokens.Add(1), 10)
		params.SetProgressToken(token)
		s.mu.Lock()
		s.progress[token] = progress
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.progress, token)
			s.mu.Unlock()
		}()
	}
	callCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.session.CallTool(callCtx, params)
	if err != nil {
		return nil, s.requestError("tool "+quote(t.name), ctx, callCtx, err)
	}
	r, err := mapResult(res)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: tool %s: %w", quote(s.name), quote(t.name), err)
	}
	if r.IsError {
		return r, &ToolError{Server: s.name, Tool: t.name, Text: r.Text()}
	}
	return r, nil
}

// ToolError is the error of a call whose result has isError set: the
// tool ran and failed. Its text is the result's text.
type ToolError struct {
	Server, Tool, Text string
}

func (e *ToolError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("tool %s of mcp server %s failed", quote(e.Tool), quote(e.Server))
	}
	return e.Text
}

// onProgress routes a progress notification to its call.
func (s *Server) onProgress(token string, p Progress) {
	s.mu.Lock()
	fn := s.progress[token]
	s.mu.Unlock()
	if fn != nil {
		fn(p)
	}
}

// usable reports why the server cannot take a call, if it cannot.
func (s *Server) usable() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("mcp server %s is closed", quote(s.name))
	}
	if s.proc != nil {
		if err := s.proc.exitError(); err != nil {
			return fmt.Errorf("mcp server %s %w", quote(s.name), err)
		}
	}
	return nil
}

// requestError names what failed in a request: cancellation of parent,
// the request's own time limit (reqCtx), the server's death, or the
// error itself.
func (s *Server) requestError(what string, parent, reqCtx context.Context, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("mcp server %s: %s cancelled: %w", quote(s.name), what, context.Cause(parent))
	case reqCtx.Err() != nil:
		return fmt.Errorf("mcp server %s: %s timed out after %v", quote(s.name), what, s.timeout)
	}
	if s.proc != nil {
		if exit := s.proc.waitExit(200 * time.Millisecond); exit != nil {
			return fmt.Errorf("mcp server %s %w", quote(s.name), exit)
		}
	}
	return fmt.Errorf("mcp server %s: %s: %w", quote(s.name), what, err)
}

// Close ends the session and stops the server: for a stdio server, its
// input is closed, then its process group gets SIGTERM and, StopGrace
// later, SIGKILL. Calls still running fail. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if s.session != nil {
			s.session.Close()
		}
		s.closeErr = s.stopProcess()
	})
	return s.closeErr
}

func (s *Server) stopProcess() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.stop()
}

// quote quotes a name for a message: 'name'.
func quote(s string) string { return "'" + s + "'" }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
