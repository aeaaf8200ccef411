// Package vm is skein's Starlark virtual machine: the per-VM State that
// every thread carries, the one dialect used for files, loads and the
// REPL, load() with its module cache, cancellation and step limits,
// Go <-> Starlark value conversion, and error formatting.
//
// A VM is one State. Everything a builtin needs (the session store, the
// clock, the id source, output writers, limits, the run's context) is
// reached from the thread with StateOf; there is no package-level mutable
// state. State.NewThread is the only way threads are made.
package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.starlark.net/lib/math"
	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workspace"
)

// DefaultMaxTurns is the default hard cap on agent_loop turns per session.
const DefaultMaxTurns = agent.DefaultMaxTurns

// Options configures a new State. Zero fields get defaults.
type Options struct {
	// Store is the session store (default: an in-memory store with the
	// default cap, Clock and NewID). A store made elsewhere should take
	// the same clock and id source (sessions.WithClock, WithIDs), so
	// messages get their times and ids from them.
	Store *sessions.Store
	// Clock reports the current time (default time.Now).
	Clock func() time.Time
	// NewID mints session ids, and message ids in the default store
	// (default: UUIDv7).
	NewID func() string
	// Stdout receives print output; Stderr diagnostics (default os.Stdout,
	// os.Stderr).
	Stdout, Stderr io.Writer
	// MaxSteps bounds the execution steps of each thread (0: no bound).
	MaxSteps uint64
	// MaxTurns is the default hard turn cap of a session (0:
	// DefaultMaxTurns; negative: none, skein serve without --max-turns).
	MaxTurns int
	// Args is the script's argument list, predeclared as argv.
	Args []string
	// Root is the directory load() may not escape (default: the working
	// directory).
	Root string
	// Builtins are predeclared in every module besides the standard ones
	// (json, time, math, struct, argv); package builtins provides them.
	Builtins starlark.StringDict
	// LLM holds the model defaults and provider factories (default: no
	// defaults, the process environment, no real providers).
	LLM *llm.Settings
	// Mock is the VM's mock provider queue (default: empty).
	Mock *mock.Mock
	// Workspace is the policy of the fs, exec and http modules and the
	// built-in agent tools (default: Root, fs scope sandboxed, no
	// commands, no network).
	Workspace *workspace.Policy
	// Approve decides a call of a tool a bound agent lists in approve
	// when the loop has no approve callback of its own (`--approve`;
	// default: every such call is refused).
	Approve func(tool string, args map[string]any) (bool, error)
}

// State is one VM: everything per-VM that builtins reach through the
// thread. Its exported fields are set by New and must not be changed
// while Starlark code runs.
type State struct {
	Store    *sessions.Store
	Clock    func() time.Time
	NewID    func() string
	Stdout   io.Writer
	Stderr   io.Writer
	MaxSteps uint64
	MaxTurns int
	Args     []string
	Root     string
	LLM      *llm.Settings
	Mock     *mock.Mock
	// Workspace is the run's workspace policy; an agent loop may narrow
	// it for what runs inside it (see WorkspaceOf).
	Workspace *workspace.Policy
	// MCP holds the MCP servers started for agent files' mcp_servers,
	// once each for the run; Close closes them.
	MCP *mcp.Pool
	// Approve is Options.Approve (nil: refuse).
	Approve func(tool string, args map[string]any) (bool, error)

	predeclared starlark.StringDict
	loader      *loader

	runMu   sync.Mutex
	ctx     context.Context
	threads map[*starlark.Thread]bool

	closeMu  sync.Mutex
	closers  []func() error
	isClosed bool

	toolsMu      sync.Mutex
	sessionTools map[string]*attached // see AttachTools
}

// New returns a State configured by opts.
func New(opts Options) (*State, error) {
	s := &State{
		Clock: opts.Clock, NewID: opts.NewID, Stdout: opts.Stdout, Stderr: opts.Stderr,
		MaxSteps: opts.MaxSteps, MaxTurns: opts.MaxTurns, Args: opts.Args, Root: opts.Root,
		Store: opts.Store, LLM: opts.LLM, Mock: opts.Mock, Workspace: opts.Workspace, Approve: opts.Approve, ctx: context.Background(),
	}
	if s.LLM == nil {
		s.LLM = &llm.Settings{Getenv: os.Getenv}
	}
	if s.Mock == nil {
		s.Mock = mock.New()
	}
	if s.Clock == nil {
		s.Clock = time.Now
	}
	if s.NewID == nil {
		s.NewID = UUIDv7
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.Root == "" {
		s.Root = "."
	}
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return nil, err
	}
	s.Root = root
	if s.Workspace == nil {
		if s.Workspace, err = workspace.New(workspace.Config{Root: root}); err != nil {
			return nil, err
		}
	}
	if s.Store == nil {
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithClock(s.Clock), sessions.WithIDs(s.NewID))
		if err != nil {
			return nil, err
		}
		s.Store = store
	}
	if s.LLM.Redactor == nil {
		s.LLM.Redactor = s.Store.Redactor()
	}
	s.MCP = &mcp.Pool{}
	s.AtClose(s.MCP.Close)
	s.predeclared = s.universe(opts.Builtins)
	s.loader = newLoader(s)
	return s, nil
}

// universe returns the predeclared names of every module: the standard
// modules, argv and the builtins.
func (s *State) universe(builtins starlark.StringDict) starlark.StringDict {
	argv := make([]starlark.Value, len(s.Args))
	for i, a := range s.Args {
		argv[i] = starlark.String(a)
	}
	list := starlark.NewList(argv)
	list.Freeze()
	u := starlark.StringDict{
		"json":   jsonModule,
		"time":   starlarktime.Module,
		"math":   math.Module,
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
		"argv":   list,
	}
	for k, v := range builtins {
		u[k] = v
	}
	return u
}

// Predeclared returns the names predeclared in every module. The caller
// must not modify the result.
func (s *State) Predeclared() starlark.StringDict { return s.predeclared }

// NewThread returns a new thread of this VM: it carries the State, prints
// to Stdout, loads through the VM's module cache, has the VM's step limit
// and clock, and is cancelled with the current run (see Begin).
func (s *State) NewThread(name string) *starlark.Thread {
	t := &starlark.Thread{
		Name:  name,
		Print: func(_ *starlark.Thread, msg string) { fmt.Fprintln(s.Stdout, msg) },
		Load:  s.loader.load,
	}
	t.SetLocal(scopeKey, &scope{state: s})
	if s.MaxSteps > 0 {
		t.SetMaxExecutionSteps(s.MaxSteps)
	}
	starlarktime.SetNow(t, func() (time.Time, error) { return s.Clock(), nil })
	s.track(t)
	return t
}

// Begin starts a run under ctx (a `skein run`, one REPL input, one test).
// Until the returned end function is called, Context returns ctx and the
// cancellation of ctx cancels every thread made by NewThread, with the
// context's cause as the reason.
func (s *State) Begin(ctx context.Context) (end func()) {
	threads := map[*starlark.Thread]bool{}
	s.runMu.Lock()
	s.ctx = ctx
	s.threads = threads
	s.runMu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		// This run's threads only: the callback may run after end, when
		// another run has begun.
		s.runMu.Lock()
		defer s.runMu.Unlock()
		for t := range threads {
			t.Cancel(cancelReason(ctx))
		}
	})
	return func() {
		stop()
		s.runMu.Lock()
		s.ctx = context.Background()
		s.threads = nil
		s.runMu.Unlock()
	}
}

// Context returns the context of the current run. Builtins that block
// should use ContextOf(thread), which also honours a running agent loop's
// own deadline.
func (s *State) Context() context.Context {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	return s.ctx
}

func (s *State) track(t *starlark.Thread) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.threads == nil {
		return
	}
	if s.ctx.Err() != nil {
		t.Cancel(cancelReason(s.ctx))
		return
	}
	s.threads[t] = true
}

// Release stops tracking a thread that has finished (a load or a parallel
// worker), so long runs do not accumulate threads.
func (s *State) Release(t *starlark.Thread) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	delete(s.threads, t)
}

// AttachTools gives every agent loop on session id tools, besides the
// loop's own, until detach is called: how a host adds tools that belong
// to one session (skein acp: the MCP servers the client passed with
// session/new). Attaching again replaces the session's tools.
func (s *State) AttachTools(id string, tools []agent.Tool) (detach func()) {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if s.sessionTools == nil {
		s.sessionTools = map[string]*attached{}
	}
	a := &attached{tools: slices.Clone(tools)}
	s.sessionTools[id] = a
	return func() {
		s.toolsMu.Lock()
		defer s.toolsMu.Unlock()
		if s.sessionTools[id] == a {
			delete(s.sessionTools, id)
		}
	}
}

// attached is one AttachTools call's tools.
type attached struct{ tools []agent.Tool }

// SessionTools returns the tools attached to session id (AttachTools).
func (s *State) SessionTools(id string) []agent.Tool {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if a := s.sessionTools[id]; a != nil {
		return a.tools
	}
	return nil
}

// AtClose registers fn to run when the VM is closed: how a builtin that
// starts something that outlives a call (an MCP server's process) has it
// stopped when the run ends. On a closed VM fn runs at once.
func (s *State) AtClose(fn func() error) {
	s.closeMu.Lock()
	if !s.isClosed {
		s.closers = append(s.closers, fn)
		s.closeMu.Unlock()
		return
	}
	s.closeMu.Unlock()
	fn()
}

// Close runs the functions registered with AtClose, newest first, each
// once, and returns their errors joined. The command that made the VM
// calls it when the run ends; Close is idempotent.
func (s *State) Close() error {
	s.closeMu.Lock()
	fns := s.closers
	s.closers, s.isClosed = nil, true
	s.closeMu.Unlock()
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		errs = append(errs, fns[i]())
	}
	return errors.Join(errs...)
}

func cancelReason(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error()
	}
	return "interrupted"
}
