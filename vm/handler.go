package vm

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/workspace"
)

// HandlerName is the function an agent file defines for skein serve:
// handle(session_id, text).
const HandlerName = "handle"

// Handler is an agent file's handle(session_id, text) function bound to
// the VM that loaded it. It implements the agent interface of package
// serve: every call runs on a new thread of the VM, so any number of
// prompts (on different sessions) may run at once over the VM's shared
// session store.
type Handler struct {
	state *State
	file  string
	fn    starlark.Callable

	mu     sync.Mutex
	queues map[string]*mock.Mock // the sessions' mock queues that hold replies
}

// LoadHandler executes the agent file filename once and returns its
// handle function, which must take exactly two parameters
// (session_id, text). The module's globals are frozen by then, so calls
// share nothing mutable.
func (s *State) LoadHandler(filename string) (*Handler, error) {
	globals, err := s.ExecFile(filename, nil)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %s", filename, FormatError(err))
	}
	v, ok := globals[HandlerName]
	if !ok {
		return nil, fmt.Errorf("agent %s: defines no function %s(session_id, text)", filename, HandlerName)
	}
	fn, ok := v.(*starlark.Function)
	if !ok {
		return nil, fmt.Errorf("agent %s: %s is a %s, want a function %s(session_id, text)", filename, HandlerName, v.Type(), HandlerName)
	}
	if fn.NumParams() != 2 || fn.HasVarargs() || fn.HasKwargs() {
		return nil, fmt.Errorf("agent %s: %s must take exactly two parameters (session_id, text), got %d", filename, HandlerName, fn.NumParams())
	}
	return &Handler{state: s, file: filename, fn: fn, queues: map[string]*mock.Mock{}}, nil
}

// Name is the agent's name: the file's stem (support.star: "support").
func (h *Handler) Name() string {
	return strings.TrimSuffix(filepath.Base(h.file), filepath.Ext(h.file))
}

// Handle runs handle(sessionID, text) on a new thread. Cancelling ctx
// cancels the thread and every blocking call it makes (model calls,
// tools); the agent loop heals the session. A Starlark error comes back
// as its traceback text.
//
// The thread's mock queue is the session's own (mock.NewSessionQueue):
// llm_mock replies queued while the session's prompts run answer that
// session only, and those a prompt leaves unused wait for its next one.
//
// When ctx carries a workspace policy (workspace.NewContext: skein serve
// passes the session's repository so), the thread is held to it instead
// of the VM's: files, commands and the agent tools work in that
// workspace.
func (h *Handler) Handle(ctx context.Context, sessionID, text string) error {
	thread := h.state.NewThread("handle " + sessionID)
	defer h.state.Release(thread)
	SetFile(thread, h.file)
	q := h.queue(sessionID)
	defer h.keepQueue(sessionID, q)
	ctx = mock.WithQueue(ctx, q)
	mustScope(thread).ctx = ctx
	if p := workspace.FromContext(ctx); p != nil {
		// the session's workspace (skein serve: its repository)
		mustScope(thread).workspace = p
	}
	stop := context.AfterFunc(ctx, func() { thread.Cancel(cancelReason(ctx)) })
	defer stop()
	_, err := starlark.Call(thread, h.fn, starlark.Tuple{starlark.String(sessionID), starlark.String(text)}, nil)
	if err != nil {
		return &HandleError{Err: err}
	}
	return nil
}

// queue returns session id's mock queue: the one a previous prompt left
// replies in, else a new one.
func (h *Handler) queue(id string) *mock.Mock {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[id]; q != nil {
		return q
	}
	return h.state.Mock.NewSessionQueue()
}

// keepQueue keeps session id's queue for its next prompt while it holds
// replies, and forgets it when it is empty.
func (h *Handler) keepQueue(id string, q *mock.Mock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.Pending() > 0 {
		h.queues[id] = q
	} else {
		delete(h.queues, id)
	}
}

// HandleError is a failure of an agent's handle function: Error returns
// the innermost Starlark traceback, as the CLI prints it.
type HandleError struct{ Err error }

func (e *HandleError) Error() string { return FormatError(e.Err) }

// Unwrap returns the underlying error.
func (e *HandleError) Unwrap() error { return e.Err }
