package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workspace"
)

// Handler runs one prompt, text, on session sessionID and returns when
// the turn is over; it is expected to append the prompt as a user
// message first (agent_loop does). Cancelling ctx must stop it promptly.
// Handle is called concurrently for different sessions, never for one
// session twice at once. Package vm's Handler is one.
type Handler interface {
	Handle(ctx context.Context, sessionID, text string) error
}

// AgentConfig configures Serve.
type AgentConfig struct {
	// Store holds the sessions (required).
	Store *sessions.Store
	// Handler runs the prompts (required).
	Handler Handler
	// Name is the agent's name, shown to the client as its title.
	Name string
	// Version is skein's version, sent to the client.
	Version string
	// NewID mints session ids (default: UUIDv7).
	NewID func() string
	// Logger receives what the client cannot be told (a cancel of an
	// unknown session, a failed write to the store) and the SDK's
	// diagnostics (default: discard).
	Logger *slog.Logger
	// Permissions, when set, is the approval callback of the VM that runs
	// Handler: it asks this connection's client.
	Permissions *Permissions
	// AttachTools gives the tools of a session's MCP servers (the
	// client's mcpServers of session/new and session/load) to every turn
	// of that session, until detach (vm.State.AttachTools). Nil, or a nil
	// Policy: a request with MCP servers is refused.
	AttachTools func(sessionID string, tools []agent.Tool) (detach func())
	// Policy is what the client's MCP servers are checked against before
	// anything starts: the command allowlist for stdio servers (and the
	// environment allowlist for their env), the network allowlist for
	// http ones.
	Policy *workspace.Policy
}

// Binder is implemented by a Handler whose sessions are bound to an
// agent (an agent file): Bind checks a new session's context and returns
// the session's metadata (the binding) and the data of its
// session:started event. session/new binds the session with the client's
// working directory as its context's workingDir.
type Binder interface {
	Bind(ctx context.Context, sessionContext map[string]any) (metadata, started map[string]any, err error)
}

// MetaKey is the key of the metadata that Serve records on a session it
// opens: {"cwd": the client's working directory, "client": its name}.
const MetaKey = "acp"

// errClosed is the cancellation cause of the turns still running when the
// client goes away.
var errClosed = errors.New("the ACP client closed the connection")

// errCancelled is the cancellation cause of session/cancel.
var errCancelled = errors.New("cancelled by the ACP client")

// Serve speaks ACP as an agent on in and out (a client's stdio) until
// the client closes in or ctx is done; then it cancels the turns still
// running, waits for them (each heals its session) and returns.
func Serve(ctx context.Context, cfg AgentConfig, in io.Reader, out io.Writer) error {
	if cfg.Store == nil || cfg.Handler == nil {
		return errors.New("acp: a store and a handler are required")
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &agentSide{cfg: cfg, sessions: map[string]*agentSession{}, ready: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	w := &lockedWriter{w: out}
	a.conn = sdk.NewAgentSideConnection(a, w, guard(in, w))
	a.conn.SetLogger(cfg.Logger)
	close(a.ready)
	if cfg.Permissions != nil {
		cfg.Permissions.side <- a
	}
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	a.cancel(errClosed)
	a.turns.Wait()
	a.mu.Lock()
	for _, s := range a.sessions {
		s.detachMCP()
	}
	a.mu.Unlock()
	return nil
}

// agentSide is the sdk.Agent that Serve runs: one per connection.
type agentSide struct {
	cfg    AgentConfig
	conn   *sdk.AgentSideConnection
	ready  chan struct{} // closed once conn is set
	ctx    context.Context
	cancel context.CancelCauseFunc
	turns  sync.WaitGroup

	mu          sync.Mutex
	initialized bool
	client      string                   // the client's name (initialize)
	sessions    map[string]*agentSession // opened on this connection
	execSeq     int64                    // tool calls announced (see Permissions)
}

// agentSession is a session this connection opened (session/new or
// session/load).
type agentSession struct {
	id   string
	cwd  string
	turn *agentTurn // the prompt running, if any
	exec *executing // the tool call its turn announced last
	// always are the tools the client allowed for good in this session.
	always map[string]bool
	// mcp are the client's MCP servers for this session, detach takes
	// their tools away from its turns.
	mcp    *sessionServers
	detach func()
}

// attachMCP gives the session's turns the tools of servers (nil: none),
// replacing and closing the servers it had. The caller holds a.mu.
func (a *agentSide) attachMCP(s *agentSession, servers *sessionServers) {
	s.detachMCP()
	if servers != nil {
		s.mcp, s.detach = servers, a.cfg.AttachTools(s.id, servers.tools)
	}
}

// detachMCP takes the session's MCP tools away and closes its servers.
func (s *agentSession) detachMCP() {
	if s.detach != nil {
		s.detach()
	}
	s.mcp.close()
	s.mcp, s.detach = nil, nil
}

// agentTurn is one running prompt.
type agentTurn struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// peer returns the connection, once Serve has set it.
func (a *agentSide) peer() *sdk.AgentSideConnection {
	<-a.ready
	return a.conn
}

// rpcError is a JSON-RPC error with code and a message naming method.
func rpcError(code int, method, format string, args ...any) *sdk.RequestError {
	return &sdk.RequestError{Code: code, Message: method + ": " + fmt.Sprintf(format, args...)}
}

// JSON-RPC error codes of ACP.
const (
	codeInvalidParams    = -32602
	codeInternalError    = -32603
	codeResourceNotFound = -32002
)

// Initialize negotiates the protocol version (1, the only one) and
// advertises what skein offers: session/load, text and embedded text
// resources in prompts.
func (a *agentSide) Initialize(ctx context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.mu.Lock()
	a.initialized = true
	if p.ClientInfo != nil {
		a.client = p.ClientInfo.Name
	}
	a.mu.Unlock()
	info := &sdk.Implementation{Name: "skein", Version: a.cfg.Version}
	if a.cfg.Name != "" {
		info.Title = sdk.Ptr(a.cfg.Name)
	}
	return sdk.InitializeResponse{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: sdk.PromptCapabilities{EmbeddedContext: true},
			McpCapabilities:    sdk.McpCapabilities{Http: true},
		},
		AgentInfo:   info,
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

// Authenticate accepts: skein offers no authentication methods (the
// client starts the process; provider keys come from its environment).
func (a *agentSide) Authenticate(ctx context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, rpcError(codeInvalidParams, "authenticate", "skein offers no authentication methods")
}

// checkInitialized refuses a call made before initialize.
func (a *agentSide) checkInitialized(method string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.initialized {
		return rpcError(codeInvalidRequest, method, "the connection is not initialized: call initialize first")
	}
	return nil
}

// checkCwd validates a session's working directory.
func checkCwd(method, cwd string) error {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return rpcError(codeInvalidParams, method, "cwd must be an absolute path, got %q", cwd)
	}
	return nil
}

// NewSession opens a new session in the store, recording the client's
// working directory.
func (a *agentSide) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	const method = "session/new"
	if err := a.checkInitialized(method); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	if err := checkCwd(method, p.Cwd); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	// The client's MCP servers start first: one that fails refuses the
	// request before anything is stored.
	servers, err := a.connectMCP(ctx, method, p.McpServers)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	// Store writes finish even when the request is cancelled (the client
	// went away): a session is never left half-written.
	ctx = context.WithoutCancel(ctx)
	id := a.cfg.NewID()
	meta := a.meta(p.Cwd, servers)
	started := map[string]any{"context": map[string]any{"workingDir": p.Cwd}}
	if b, ok := a.cfg.Handler.(Binder); ok {
		bound, data, err := b.Bind(ctx, map[string]any{"workingDir": p.Cwd})
		if err != nil {
			servers.close()
			return sdk.NewSessionResponse{}, rpcError(codeInvalidParams, method, "%v", err)
		}
		meta, started = sessions.MergeMetadata(bound, meta), data
	}
	if err := a.cfg.Store.Create(ctx, id, sessions.Info{Metadata: meta, Started: started}); err != nil {
		servers.close()
		return sdk.NewSessionResponse{}, rpcError(codeInternalError, method, "%v", err)
	}
	a.mu.Lock()
	s := &agentSession{id: id, cwd: p.Cwd, always: map[string]bool{}}
	a.sessions[id] = s
	a.attachMCP(s, servers)
	a.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(id)}, nil
}

// meta is the metadata recorded on a session opened with working
// directory cwd and the client's MCP servers (their names).
func (a *agentSide) meta(cwd string, servers *sessionServers) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := map[string]any{"cwd": cwd}
	if a.client != "" {
		m["client"] = a.client
	}
	if servers != nil {
		names := make([]any, len(servers.names))
		for i, n := range servers.names {
			names[i] = n
		}
		m["mcpServers"] = names
	}
	return map[string]any{MetaKey: m}
}

// LoadSession replays a stored session (any session of the store, one
// written by skein run included) as session/update notifications, then
// answers; the session can then be prompted.
func (a *agentSide) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	const method = "session/load"
	if err := a.checkInitialized(method); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := checkCwd(method, p.Cwd); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	id := string(p.SessionId)
	a.mu.Lock()
	if s := a.sessions[id]; s != nil && s.turn != nil {
		a.mu.Unlock()
		return sdk.LoadSessionResponse{}, rpcError(codeInvalidRequest, method, "session '%s' has a prompt running", id)
	}
	a.mu.Unlock()
	if id == "" {
		return sdk.LoadSessionResponse{}, rpcError(codeInvalidParams, method, "sessionId is required")
	}
	wctx := context.WithoutCancel(ctx)
	if err := a.cfg.Store.Heal(wctx, id, "interrupted"); err != nil {
		if errors.Is(err, sessions.ErrNotFound) {
			return sdk.LoadSessionResponse{}, &sdk.RequestError{Code: codeResourceNotFound, Message: method + ": unknown session id '" + id + "'"}
		}
		return sdk.LoadSessionResponse{}, rpcError(codeInternalError, method, "%v", err)
	}
	msgs, err := a.cfg.Store.ReadMessages(ctx, id)
	if err != nil {
		return sdk.LoadSessionResponse{}, rpcError(codeInternalError, method, "%v", err)
	}
	servers, err := a.connectMCP(ctx, method, p.McpServers)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if _, err := a.cfg.Store.SetInfo(wctx, id, sessions.Info{Metadata: a.meta(p.Cwd, servers)}); err != nil {
		servers.close()
		return sdk.LoadSessionResponse{}, rpcError(codeInternalError, method, "%v", err)
	}
	conn := a.peer()
	for _, u := range replay(msgs) {
		if err := conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			servers.close()
			return sdk.LoadSessionResponse{}, err
		}
	}
	a.mu.Lock()
	if a.sessions[id] == nil {
		a.sessions[id] = &agentSession{id: id, always: map[string]bool{}}
	}
	a.sessions[id].cwd = p.Cwd
	a.attachMCP(a.sessions[id], servers)
	a.mu.Unlock()
	return sdk.LoadSessionResponse{}, nil
}

// Prompt runs one turn of the agent on the session, streaming what it
// stores, and answers with the turn's stop reason.
func (a *agentSide) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	const method = "session/prompt"
	if err := a.checkInitialized(method); err != nil {
		return sdk.PromptResponse{}, err
	}
	text := promptText(p.Prompt)
	if strings.TrimSpace(text) == "" {
		return sdk.PromptResponse{}, rpcError(codeInvalidParams, method, "the prompt has no text")
	}
	id := string(p.SessionId)
	t, err := a.startTurn(method, id)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	defer a.endTurn(id)
	// The turn's context is not the request's: the SDK cancels a
	// session's running prompt request when another prompt for it
	// arrives, and ACP leaves that prompt running (the second one is
	// refused above). The turn stops on session/cancel and when the
	// client goes away.
	st := newStream(a.ctx, a.peer(), a.cfg.Store, id)
	st.onExec = a.noteExecuting
	reason, err := st.run(t.ctx, func() error { return a.cfg.Handler.Handle(t.ctx, id, text) }, text, a.cfg.Logger)
	if err != nil {
		return sdk.PromptResponse{}, rpcError(codeInternalError, method, "the turn failed: %v", err)
	}
	return sdk.PromptResponse{StopReason: reason}, nil
}

// startTurn registers a prompt on session id: the session must have been
// opened on this connection and have no prompt running.
func (a *agentSide) startTurn(method, id string) (*agentTurn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[id]
	switch {
	case s == nil:
		return nil, &sdk.RequestError{Code: codeResourceNotFound, Message: method + ": unknown session id '" + id + "' (open it with session/new or session/load first)"}
	case s.turn != nil:
		return nil, rpcError(codeInvalidRequest, method, "session '%s' has a prompt running (send session/cancel to stop it)", id)
	case a.ctx.Err() != nil:
		return nil, rpcError(codeInternalError, method, "the connection is closing")
	}
	t := &agentTurn{}
	t.ctx, t.cancel = context.WithCancelCause(a.ctx)
	s.turn = t
	a.turns.Add(1)
	return t, nil
}

// endTurn unregisters the prompt of session id.
func (a *agentSide) endTurn(id string) {
	a.mu.Lock()
	if s := a.sessions[id]; s != nil && s.turn != nil {
		s.turn.cancel(nil)
		s.turn, s.exec = nil, nil
	}
	a.mu.Unlock()
	a.turns.Done()
}

// Cancel stops the prompt running on the session, if any: the turn ends
// (healed) and its prompt is answered with stop reason "cancelled".
func (a *agentSide) Cancel(ctx context.Context, p sdk.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[string(p.SessionId)]
	switch {
	case s == nil:
		a.cfg.Logger.Warn("session/cancel of a session this connection did not open", "session", string(p.SessionId))
	case s.turn != nil:
		s.turn.cancel(errCancelled)
	}
	return nil
}

// The methods below are ACP's optional ones, which skein does not
// advertise: a call gets "method not found".

func (a *agentSide) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionClose)
}

func (a *agentSide) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionList)
}

func (a *agentSide) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionResume)
}

func (a *agentSide) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionSetConfigOption)
}

func (a *agentSide) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionSetMode)
}
