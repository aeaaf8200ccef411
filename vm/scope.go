package vm

import (
	"context"
	"errors"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/workspace"
)

// scope is the per-thread state of a skein thread. NewThread sets it as
// the thread's one local before the thread runs; afterwards the helpers
// (WithContext, WithWorkspace, PushLoop) change its fields and never
// the thread's locals, which go.starlark.net does not allow once
// execution has begun.
//
// A thread runs one call at a time, so its scope needs no lock: a pushed
// value is popped by the same goroutine before the thread runs anything
// else.
type scope struct {
	state *State
	// file is the file whose code the thread runs (SetFile), against
	// which load() resolves relative paths.
	file string
	// loads is the chain of modules being loaded that led to this thread,
	// outermost first (a cycle check).
	loads []string
	// ctx is the innermost context set by WithContext (nil: the run's).
	ctx context.Context
	// workspace is the innermost policy set by WithWorkspace (nil: the
	// VM's).
	workspace *workspace.Policy
	// loops is the stack of the agent loops running on the thread,
	// innermost last; package builtins keeps its loop frames here.
	loops []any
	// defaults are the call defaults set by WithCallDefaults (nil: none).
	defaults map[string]starlark.Value
}

const scopeKey = "skein.vm.scope"

var errForeignThread = errors.New("this thread has no skein VM state (threads must come from vm.State.NewThread)")

// scopeOf returns the thread's scope, or nil for a thread not made by
// State.NewThread.
func scopeOf(thread *starlark.Thread) *scope {
	sc, _ := thread.Local(scopeKey).(*scope)
	return sc
}

// mustScope returns the thread's scope; the helpers that change it are
// only called on skein threads, so a foreign thread is a programming
// error.
func mustScope(thread *starlark.Thread) *scope {
	sc := scopeOf(thread)
	if sc == nil {
		panic("vm: " + errForeignThread.Error())
	}
	return sc
}

// StateOf returns the State of the thread, or an error if the thread was
// not made by State.NewThread.
func StateOf(thread *starlark.Thread) (*State, error) {
	sc := scopeOf(thread)
	if sc == nil || sc.state == nil {
		return nil, errForeignThread
	}
	return sc.state, nil
}

// ContextOf returns the context blocking Go code called from thread must
// honour: the innermost one set by WithContext (an agent loop with its
// own timeout), else the run's.
func ContextOf(thread *starlark.Thread) context.Context {
	sc := scopeOf(thread)
	switch {
	case sc == nil:
		return context.Background()
	case sc.ctx != nil:
		return sc.ctx
	}
	return sc.state.Context()
}

// WithContext makes ctx the thread's context until restore is called.
func WithContext(thread *starlark.Thread, ctx context.Context) (restore func()) {
	sc := mustScope(thread)
	prev := sc.ctx
	sc.ctx = ctx
	return func() { sc.ctx = prev }
}

// WorkspaceOf returns the workspace policy that Starlark code running on
// thread is held to: the innermost one set by WithWorkspace (an agent
// loop given a narrowed policy), else the VM's.
func WorkspaceOf(thread *starlark.Thread) (*workspace.Policy, error) {
	sc := scopeOf(thread)
	if sc == nil {
		return nil, errForeignThread
	}
	if sc.workspace != nil {
		return sc.workspace, nil
	}
	return sc.state.Workspace, nil
}

// WithWorkspace makes p the thread's workspace policy until restore is
// called. The caller is responsible for p being no wider than the policy
// it replaces (workspace.Policy.Narrow).
func WithWorkspace(thread *starlark.Thread, p *workspace.Policy) (restore func()) {
	sc := mustScope(thread)
	prev := sc.workspace
	sc.workspace = p
	return func() { sc.workspace = prev }
}

// PushLoop makes loop the innermost agent loop running on thread until
// pop is called. The value is opaque to vm: package builtins pushes its
// loop frame (session, provider, budget).
func PushLoop(thread *starlark.Thread, loop any) (pop func()) {
	sc := mustScope(thread)
	n := len(sc.loops)
	sc.loops = append(sc.loops, loop)
	return func() { sc.loops = sc.loops[:n] }
}

// CurrentLoop returns the innermost agent loop running on thread, or nil.
func CurrentLoop(thread *starlark.Thread) any {
	sc := scopeOf(thread)
	if sc == nil || len(sc.loops) == 0 {
		return nil
	}
	return sc.loops[len(sc.loops)-1]
}
