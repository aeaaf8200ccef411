package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workspace"
)

// Defaults of ExternalConfig.
const (
	DefaultStartTimeout  = 30 * time.Second
	DefaultCancelTimeout = 10 * time.Second
	DefaultStopTimeout   = 5 * time.Second
	// stderrTail is how much of an agent's standard error is kept for
	// the message of its crash.
	stderrTail = 2048
)

// EventTurnEnd is the event an external agent's turn logs when its
// prompt is answered: {"agent", "stop_reason"}.
const EventTurnEnd = "acp_turn_end"

// ExternalConfig configures an External agent.
type ExternalConfig struct {
	// Name is the served agent's name (required).
	Name string
	// Argv is the agent's command line (required).
	Argv []string
	// Command returns the process to start for argv, not started, with
	// its environment and checks (package workspace's Policy.Command);
	// its streams are set by External.
	Command func(argv []string) (*exec.Cmd, error)
	// Terminate asks a started process and what it started to stop
	// (workspace.TerminateGroup); Kill kills them (workspace.KillGroup).
	Terminate, Kill func(*exec.Cmd)
	// Store holds the sessions (required).
	Store *sessions.Store
	// Cwd is the working directory sent in session/new: an absolute path
	// (required). A session whose context carries a workspace policy
	// (workspace.NewContext: skein serve's repository) sends its root
	// instead.
	Cwd string
	// Shared runs one process for every session of the agent, each an
	// ACP session of its own; otherwise each session has its process.
	Shared bool
	// StartTimeout bounds starting a process and its initialize and
	// session/new (default DefaultStartTimeout).
	StartTimeout time.Duration
	// CancelTimeout is how long a cancelled prompt waits for the agent
	// to answer it after session/cancel before its process is stopped
	// (default DefaultCancelTimeout).
	CancelTimeout time.Duration
	// StopTimeout is how long a process gets between SIGTERM and SIGKILL
	// (default DefaultStopTimeout).
	StopTimeout time.Duration
	// Version is skein's version, sent in initialize.
	Version string
	// Logger receives one line per process started, stopped or failed
	// (default: discard).
	Logger *slog.Logger
}

// External is an external ACP agent that skein serve runs sessions on:
// a process per session (or one shared), driven as an ACP client. It
// implements the Agent interface of package serve and its per-session
// Open and Close.
type External struct {
	cfg ExternalConfig

	mu       sync.Mutex
	sessions map[string]*extSession // open sessions by skein id
	shared   *proc
	closed   bool
	onFail   func(id string, err error)
}

// extSession is one skein session open on an agent process.
type extSession struct {
	id    string
	acpID sdk.SessionId
	proc  *proc
	turn  *collector // the prompt running, if any (guarded by proc.mu)
}

// NewExternal returns an external agent; no process starts before a
// session opens.
func NewExternal(cfg ExternalConfig) (*External, error) {
	switch {
	case cfg.Name == "" || len(cfg.Argv) == 0:
		return nil, errors.New("acp: an external agent needs a name and a command")
	case cfg.Command == nil || cfg.Terminate == nil || cfg.Kill == nil || cfg.Store == nil:
		return nil, errors.New("acp: an external agent needs Command, Terminate, Kill and a Store")
	case !strings.HasPrefix(cfg.Cwd, "/") && !strings.Contains(cfg.Cwd, `:\`):
		return nil, fmt.Errorf("acp: the working directory of an external agent must be absolute, got %q", cfg.Cwd)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = DefaultCancelTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &External{cfg: cfg, sessions: map[string]*extSession{}}, nil
}

// Name is the agent's name.
func (e *External) Name() string { return e.cfg.Name }

// OnFailure sets the function told when a session's process dies while
// no prompt of it runs (a running prompt fails with the error instead):
// skein serve marks the session "error" with it.
func (e *External) OnFailure(fn func(id string, err error)) {
	e.mu.Lock()
	e.onFail = fn
	e.mu.Unlock()
}

// Open starts session id on the agent: its process (unless shared and
// running) and an ACP session (session/new, or session/load of the ACP
// session the store recorded when the agent can load sessions).
func (e *External) Open(ctx context.Context, id string) error {
	_, err := e.open(ctx, id)
	return err
}

func (e *External) open(ctx context.Context, id string) (*extSession, error) {
	e.mu.Lock()
	if s := e.sessions[id]; s != nil {
		e.mu.Unlock()
		return s, nil
	}
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("agent %s is shutting down", e.cfg.Name)
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.StartTimeout)
	defer cancel()
	p, err := e.process(ctx)
	if err != nil {
		return nil, err
	}
	s := &extSession{id: id, proc: p}
	cwd := e.cfg.Cwd
	if wp := workspace.FromContext(ctx); wp != nil {
		cwd = wp.Root() // the session's workspace (its repository)
	}
	prev := e.storedSession(ctx, id)
	if prev != "" && p.caps.LoadSession {
		// The store knows the agent's session (skein serve restarted):
		// the agent replays it, which the store already has.
		p.route(sdk.SessionId(prev), s)
		if _, err := p.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(prev), Cwd: cwd, McpServers: []sdk.McpServer{}}); err == nil {
			s.acpID = sdk.SessionId(prev)
		} else {
			p.unroute(sdk.SessionId(prev))
		}
	}
	if s.acpID == "" {
		resp, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
		if err != nil {
			e.release(p)
			return nil, p.failure("session/new", err)
		}
		s.acpID = resp.SessionId
		p.route(s.acpID, s)
		meta := map[string]any{MetaKey: map[string]any{"sessionId": string(s.acpID), "cwd": cwd}}
		if _, err := e.cfg.Store.SetInfo(context.WithoutCancel(ctx), id, sessions.Info{Metadata: meta}); err != nil {
			e.cfg.Logger.Warn("recording the agent's session id failed", "session", id, "err", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if other := e.sessions[id]; other != nil {
		// Opened twice at once (a prompt racing the creation): keep one.
		p.unroute(s.acpID)
		e.releaseLocked(p)
		return other, nil
	}
	e.sessions[id] = s
	return s, nil
}

// storedSession returns the ACP session id the store recorded for
// session id, if any.
func (e *External) storedSession(ctx context.Context, id string) string {
	rec, err := e.cfg.Store.Meta(ctx, id)
	if err != nil {
		return ""
	}
	m, _ := rec.Metadata[MetaKey].(map[string]any)
	s, _ := m["sessionId"].(string)
	return s
}

// process returns the process a new session uses: the shared one
// (started if needed) or a new one.
func (e *External) process(ctx context.Context) (*proc, error) {
	if !e.cfg.Shared {
		return e.start(ctx)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shared != nil && !e.shared.dead() {
		return e.shared, nil
	}
	p, err := e.start(ctx)
	if err != nil {
		return nil, err
	}
	e.shared = p
	return p, nil
}

// release stops p unless it is the shared process.
func (e *External) release(p *proc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releaseLocked(p)
}

func (e *External) releaseLocked(p *proc) {
	if p != e.shared {
		go p.stop()
	}
}

// Close ends session id on the agent: session/cancel, then its process
// is stopped (SIGTERM, SIGKILL after StopTimeout); on a shared process
// only its ACP session ends.
func (e *External) Close(id string) {
	e.mu.Lock()
	s := e.sessions[id]
	delete(e.sessions, id)
	e.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.StopTimeout)
	defer cancel()
	if !s.proc.dead() {
		_ = s.proc.conn.Cancel(ctx, sdk.CancelNotification{SessionId: s.acpID})
		if e.cfg.Shared && s.proc.caps.SessionCapabilities.Close != nil {
			_, _ = s.proc.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: s.acpID})
		}
	}
	s.proc.unroute(s.acpID)
	e.release(s.proc)
}

// Shutdown stops every process of the agent and waits for them.
func (e *External) Shutdown() {
	e.mu.Lock()
	e.closed = true
	var procs []*proc
	for _, s := range e.sessions {
		procs = append(procs, s.proc)
	}
	if e.shared != nil {
		procs = append(procs, e.shared)
	}
	e.sessions = map[string]*extSession{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// Handle runs one prompt on the agent: it stores the prompt as a user
// message, sends it as session/prompt and stores the updates the agent
// streams (see collector) until it answers. Cancelling ctx sends
// session/cancel and waits up to CancelTimeout for the answer (then the
// process is stopped); the turn is healed either way. A process that
// dies fails the turn with its exit status and the tail of its standard
// error.
func (e *External) Handle(ctx context.Context, id, text string) error {
	s, err := e.open(ctx, id)
	if err != nil {
		return err
	}
	wctx := context.WithoutCancel(ctx)
	events, err := e.cfg.Store.Apply(wctx, id, &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: text}}})
	if err != nil {
		return err
	}
	c := newCollector(wctx, e.cfg.Store, id, events[len(events)-1].Seq)
	p := s.proc
	p.mu.Lock()
	s.turn = c
	p.mu.Unlock()
	type answer struct {
		resp sdk.PromptResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := p.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: s.acpID, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
		answered <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-ctx.Done():
		_ = p.conn.Cancel(wctx, sdk.CancelNotification{SessionId: s.acpID})
		select {
		case a = <-answered:
		case <-time.After(e.cfg.CancelTimeout):
			e.cfg.Logger.Warn("the agent did not answer a cancelled prompt: stopping it", "agent", e.cfg.Name, "session", id)
			e.Close(id)
			a = <-answered
		}
	}
	p.mu.Lock()
	s.turn = nil
	p.mu.Unlock()
	reason := "interrupted"
	if ctx.Err() != nil {
		reason = "cancelled"
	}
	if err := c.finish(reason); err != nil {
		return err
	}
	if ctx.Err() != nil {
		if err := e.completed(wctx, id, agent.TurnCompleted(agent.StopCancelled, "", "")); err != nil {
			return err
		}
		return context.Cause(ctx)
	}
	if a.err != nil {
		err := p.failure("session/prompt", a.err)
		if werr := e.completed(wctx, id, agent.TurnCompleted("", agent.CodeFailed, err.Error())); werr != nil {
			e.cfg.Logger.Warn("logging the failed turn's end", "agent", e.cfg.Name, "session", id, "err", werr)
		}
		return err
	}
	return e.completed(wctx, id, sessions.NewEvent(EventTurnEnd, map[string]any{"agent": e.cfg.Name, "stop_reason": string(a.resp.StopReason)}),
		turnCompleted(a.resp.StopReason))
}

// completed logs the end of a turn on session id: events, the last of
// them its session:turn_completed.
func (e *External) completed(ctx context.Context, id string, events ...sessions.Event) error {
	_, err := e.cfg.Store.Apply(ctx, id, &sessions.Change{Events: events})
	return err
}

// turnCompleted is the session:turn_completed event of a prompt the agent
// answered with stop reason r: end_turn and cancelled as they are; the
// other reasons end the turn with stopReason "error", the reason as
// error.code (max_turn_requests as "turn_limit", the code of a turn's
// iteration guard).
func turnCompleted(r sdk.StopReason) sessions.Event {
	switch r {
	case sdk.StopReasonEndTurn:
		return agent.TurnCompleted(agent.StopEndTurn, "", "")
	case sdk.StopReasonCancelled:
		return agent.TurnCompleted(agent.StopCancelled, "", "")
	case sdk.StopReasonMaxTurnRequests:
		return agent.TurnCompleted("", agent.CodeTurnLimit, "the agent reached its maximum number of model requests in the turn (max_turn_requests)")
	case sdk.StopReasonMaxTokens:
		return agent.TurnCompleted("", string(r), "the agent reached its maximum number of tokens (max_tokens)")
	case sdk.StopReasonRefusal:
		return agent.TurnCompleted("", string(r), "the agent refused to continue (refusal)")
	}
	return agent.TurnCompleted("", agent.CodeFailed, fmt.Sprintf("the agent ended the turn with stop reason '%s'", r))
}

// failed reports a session's process dying outside a prompt.
func (e *External) failed(p *proc, err error) {
	e.mu.Lock()
	var ids []string
	for id, s := range e.sessions {
		if s.proc == p {
			ids = append(ids, id)
			delete(e.sessions, id)
		}
	}
	fn := e.onFail
	e.mu.Unlock()
	for _, id := range ids {
		e.cfg.Logger.Warn("agent process failed", "agent", e.cfg.Name, "session", id, "err", err)
		if fn != nil {
			fn(id, err)
		}
	}
}

// proc is one running agent process and the ACP connection to it.
type proc struct {
	ext    *External
	cmd    *exec.Cmd
	conn   *sdk.ClientSideConnection
	stdin  io.WriteCloser
	stderr *workspace.Tail
	caps   sdk.AgentCapabilities
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited (set before exited is closed)

	mu       sync.Mutex
	routes   map[sdk.SessionId]*extSession
	stopping bool // skein stopped it: its exit is no failure
}

// start starts a process of the agent and initializes it.
func (e *External) start(ctx context.Context) (*proc, error) {
	cmd, err := e.cfg.Command(e.cfg.Argv)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", e.cfg.Name, err)
	}
	p := &proc{ext: e, cmd: cmd, stderr: &workspace.Tail{Max: stderrTail}, exited: make(chan struct{}), routes: map[sdk.SessionId]*extSession{}}
	// Own pipes rather than exec's: Wait must not close the output the
	// connection is still reading.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		closeAll(outR, outW, errR, errW)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW)
		return nil, fmt.Errorf("agent %s: starting %s: %w", e.cfg.Name, e.cfg.Argv[0], err)
	}
	closeAll(outW, errW)
	copied := make(chan struct{})
	go func() { io.Copy(p.stderr, errR); errR.Close(); close(copied) }()
	p.conn = sdk.NewClientSideConnection(p, p.stdin, outR)
	p.conn.SetLogger(e.cfg.Logger)
	go func() {
		err := cmd.Wait()
		select {
		case <-copied:
		case <-time.After(time.Second): // a child kept stderr open
		}
		p.err = err
		close(p.exited)
		outR.Close()
		p.exit()
	}()
	e.cfg.Logger.Info("agent process started", "agent", e.cfg.Name, "pid", cmd.Process.Pid)
	init, err := p.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{}, ClientInfo: &sdk.Implementation{Name: "skein", Version: e.cfg.Version}})
	if err != nil {
		go p.stop()
		return nil, p.failure("initialize", err)
	}
	if init.ProtocolVersion != sdk.ProtocolVersionNumber {
		go p.stop()
		return nil, fmt.Errorf("agent %s speaks ACP version %d; skein speaks version %d", e.cfg.Name, init.ProtocolVersion, sdk.ProtocolVersionNumber)
	}
	p.caps = init.AgentCapabilities
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// dead reports whether the process has exited.
func (p *proc) dead() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// failure is the error of a call to the agent that failed: when the
// process died (or dies within a second), its exit and the tail of its
// standard error; else the agent's error.
func (p *proc) failure(method string, err error) error {
	select {
	case <-p.exited:
	case <-p.conn.Done():
		select {
		case <-p.exited:
		case <-time.After(time.Second):
		}
	default:
	}
	if p.dead() {
		return p.exitError()
	}
	var re *sdk.RequestError
	if errors.As(err, &re) {
		return fmt.Errorf("agent %s: %s failed: %s (JSON-RPC error %d)", p.ext.cfg.Name, method, re.Message, re.Code)
	}
	return fmt.Errorf("agent %s: %s failed: %w", p.ext.cfg.Name, method, err)
}

// exitError describes the process's exit, with the tail of its
// standard error.
func (p *proc) exitError() error {
	how := "exited"
	if p.err != nil {
		how = p.err.Error()
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			how = "ended: " + ee.ProcessState.String() // "exit status 3", "signal: killed"
		}
	}
	msg := fmt.Sprintf("agent %s: the agent process (%s) %s", p.ext.cfg.Name, p.ext.cfg.Argv[0], how)
	if t := strings.TrimSpace(p.stderr.String()); t != "" {
		msg += "; its standard error ended with:\n" + t
	} else {
		msg += " (nothing on its standard error)"
	}
	return errors.New(msg)
}

// exit runs when the process has exited: unless skein stopped it, the
// sessions on it have failed. (A running prompt fails by itself too,
// with the same error.)
func (p *proc) exit() {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		p.ext.cfg.Logger.Info("agent process stopped", "agent", p.ext.cfg.Name, "pid", p.cmd.Process.Pid)
		return
	}
	p.ext.failed(p, p.exitError())
}

// stop stops the process: stdin closed, SIGTERM to its group, SIGKILL
// after StopTimeout; it returns once it has exited.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	if p.dead() {
		return
	}
	p.stdin.Close()
	p.ext.cfg.Terminate(p.cmd)
	select {
	case <-p.exited:
	case <-time.After(p.ext.cfg.StopTimeout):
		p.ext.cfg.Kill(p.cmd)
		<-p.exited
	}
}

func (p *proc) route(id sdk.SessionId, s *extSession) {
	p.mu.Lock()
	p.routes[id] = s
	p.mu.Unlock()
}

func (p *proc) unroute(id sdk.SessionId) {
	p.mu.Lock()
	delete(p.routes, id)
	p.mu.Unlock()
}

// SessionUpdate takes an update from the agent: one of a running prompt
// goes to its collector; others (a session/load's replay, commands
// offered between prompts) change nothing stored.
func (p *proc) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	p.mu.Lock()
	var c *collector
	if s := p.routes[n.SessionId]; s != nil {
		c = s.turn
	}
	p.mu.Unlock()
	if c != nil {
		c.update(n.Update)
	}
	return nil
}

// RequestPermission refuses: a served session has no one to ask. The
// agent gets its reject_once option (or a cancelled outcome when it
// offers none), and the refusal is logged on the session as a
// security_decision event.
func (p *proc) RequestPermission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	p.mu.Lock()
	s := p.routes[r.SessionId]
	p.mu.Unlock()
	title := ""
	if r.ToolCall.Title != nil {
		title = *r.ToolCall.Title
	}
	if s != nil {
		ev := sessions.NewEvent(agent.EventSecurityDecision, map[string]any{"decision": "deny", "action": "call " + title, "rule": "acp permission",
			"reason": "skein serve grants no permission an external agent asks for", "tool": title})
		ev.CorrID = string(r.ToolCall.ToolCallId)
		if _, err := p.ext.cfg.Store.Apply(context.WithoutCancel(ctx), s.id, &sessions.Change{Events: []sessions.Event{ev}}); err != nil {
			p.ext.cfg.Logger.Warn("logging a refused permission failed", "session", s.id, "err", err)
		}
	}
	for _, o := range r.Options {
		if o.Kind == sdk.PermissionOptionKindRejectOnce {
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
		}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// The file system and terminal methods are not offered (initialize
// advertises no client capabilities): an agent that calls them anyway
// gets "method not found".

func (p *proc) ReadTextFile(ctx context.Context, r sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

func (p *proc) WriteTextFile(ctx context.Context, r sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

func (p *proc) CreateTerminal(ctx context.Context, r sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

func (p *proc) KillTerminal(ctx context.Context, r sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

func (p *proc) TerminalOutput(ctx context.Context, r sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

func (p *proc) ReleaseTerminal(ctx context.Context, r sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

func (p *proc) WaitForTerminalExit(ctx context.Context, r sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}
