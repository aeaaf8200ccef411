package builtins

// Session builtins.
//
//	agent_session_open(id=None, max_turns=None, title=None, metadata=None) -> str
//	agent_session_update(id, title=None, metadata=None) -> None
//	agent_session_exists(id) -> bool
//	agent_session_length(id) -> int
//	agent_session_snapshot(id) -> dict or None
//	agent_session_reset(id) -> None
//	agent_session_fork(src, dst=None) -> str
//	agent_session_fork_at(src, keep_first, dst=None) -> str
//	agent_session_trim(id, keep_last) -> int
//	agent_session_rewind(id, turns=1) -> int
//	agent_session_inject(id, message) -> None
//	agent_session_close(id) -> None
//	agent_session_ancestry(id) -> dict or None
//	agent_session_current_id() -> str or None
//	agent_subscribe(id, callback) -> None
//	agent_inject_feedback(id, kind, content) -> None

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

func sessionSpecs() []Spec {
	const area = "Sessions"
	return []Spec{
		{"agent_session_open", "(id=None, max_turns=None, title=None, metadata=None, agent=None, context=None) -> str", "Open (resume or create) a session; None mints a UUIDv7 id. title and metadata are set on create, merged in on resume; agent binds a new session to an agent for good (its frozen snapshot is stored), context sets its session context.", area, sessionOpen},
		{"agent_session_update", "(id, title=None, metadata=None, context=None) -> None", "Set the session's title, merge keys into its metadata, replace its session context.", area, sessionUpdate},
		{"agent_session_exists", "(id) -> bool", "Whether a session is live or stored.", area, sessionExists},
		{"agent_session_length", "(id) -> int", "The session's message count.", area, sessionLength},
		{"agent_session_snapshot", "(id) -> dict or None", "A deep, mutable copy of the session (None for an unknown id).", area, sessionSnapshot},
		{"agent_session_reset", "(id) -> None", "Drop all messages and the summary; keep id, subscribers, lineage and the event log.", area, sessionReset},
		{"agent_session_fork", "(src, dst=None) -> str", "A new child session sharing src's transcript; subscribers are not copied.", area, sessionFork},
		{"agent_session_fork_at", "(src, keep_first, dst=None) -> str", "Like fork, keeping only the first keep_first messages.", area, sessionForkAt},
		{"agent_session_trim", "(id, keep_last) -> int", "Keep the newest keep_last messages without splitting a tool call from its results; returns the kept count.", area, sessionTrim},
		{"agent_session_rewind", "(id, turns=1) -> int", "Drop the last turns user turns (each from its user message on); returns the new length. Not undoable: fork first to keep the old branch.", area, sessionRewind},
		{"agent_session_inject", "(id, message) -> None", "Append one validated message.", area, sessionInject},
		{"agent_session_close", "(id) -> None", "Evict the session from this VM (a durable store keeps it, marked completed).", area, sessionClose},
		{"agent_session_ancestry", "(id) -> dict or None", "{parent_id, child_ids, root_id} (None for an unknown id).", area, sessionAncestry},
		{"agent_session_current_id", "() -> str or None", "The session of the innermost running agent_loop, else None.", area, sessionCurrentID},
		{"agent_subscribe", "(id, callback) -> None", "Call callback(event) for every event of the session.", area, subscribe},
		{"agent_inject_feedback", "(id, kind, content) -> None", "Queue a user message for the next turn of a loop on the session.", area, injectFeedback},
	}
}

func isNotFound(err error) bool { return errors.Is(err, sessions.ErrNotFound) }

// optionalID unpacks an id parameter that may be None (mint one) or a
// non-empty string.
func optionalID(fn, param string, v starlark.Value) (string, bool, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return "", false, nil
	case starlark.String:
		if v == "" {
			return "", false, fmt.Errorf("%s: '%s' must not be empty", fn, param)
		}
		if err := sessions.CheckID(string(v)); err != nil {
			return "", false, fmt.Errorf("%s: %s: %v", fn, param, err)
		}
		return string(v), true, nil
	}
	return "", false, fmt.Errorf("%s: for parameter %s: got %s, want string or None", fn, param, v.Type())
}

// idCall is the shape of the builtins whose only parameter is a session
// id: it unpacks id, finds the VM state and calls do with the context
// blocking work must honour.
func idCall(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple,
	do func(st *vm.State, ctx context.Context, id string) (starlark.Value, error)) (starlark.Value, error) {
	var id string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	return do(st, vm.ContextOf(thread), id)
}

// nonNegative checks an int parameter in the API's words.
func nonNegative(fn, param string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s: '%s' must be >= 0", fn, param)
	}
	return nil
}

// sessionInfo unpacks the title and metadata parameters of
// agent_session_open and agent_session_update (None: unchanged).
func sessionInfo(fn string, titleV, metaV starlark.Value) (sessions.Info, error) {
	var info sessions.Info
	switch v := titleV.(type) {
	case starlark.NoneType:
	case starlark.String:
		t := string(v)
		info.Title = &t
	default:
		return info, fmt.Errorf("%s: for parameter title: got %s, want string or None", fn, titleV.Type())
	}
	if metaV != starlark.None {
		if _, ok := metaV.(*starlark.Dict); !ok {
			return info, fmt.Errorf("%s: for parameter metadata: got %s, want dict or None", fn, metaV.Type())
		}
		m, err := vm.FromStarlark(metaV, "metadata")
		if err != nil {
			return info, fail(fn, err)
		}
		info.Metadata = m.(map[string]any)
	}
	return info, checkReservedMetadata(fn, info)
}

func sessionOpen(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var idv, maxTurnsV, titleV, metaV, agentV, contextV starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id?", &idv, "max_turns?", &maxTurnsV, "title?", &titleV, "metadata?", &metaV,
		"agent?", &agentV, "context?", &contextV); err != nil {
		return nil, err
	}
	id, given, err := optionalID(b.Name(), "id", idv)
	if err != nil {
		return nil, err
	}
	info, err := sessionInfo(b.Name(), titleV, metaV)
	if err != nil {
		return nil, err
	}
	maxTurns := 0
	if maxTurnsV != starlark.None {
		i, ok := maxTurnsV.(starlark.Int)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter max_turns: got %s, want int or None", b.Name(), maxTurnsV.Type())
		}
		n, ok := i.Int64()
		if !ok || n < 0 || n > 1<<31 {
			return nil, fmt.Errorf("%s: 'max_turns' must be >= 0 (0: the default cap)", b.Name())
		}
		maxTurns = int(n) // 0: the VM's default, as for None
	}
	var def *agent.Definition
	switch v := agentV.(type) {
	case starlark.NoneType:
	case *Agent:
		def = v.def
	default:
		return nil, fmt.Errorf("%s: for parameter agent: got %s, want agent or None", b.Name(), agentV.Type())
	}
	sc, err := contextArg(thread, b.Name(), contextV)
	if err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if !given {
		id = st.NewID()
	}
	if err := openBound(thread, st, b.Name(), id, def, sc, sessions.OpenOptions{MaxTurns: maxTurns, Info: info}); err != nil {
		return nil, err
	}
	return starlark.String(id), nil
}

// openBound opens (resumes or creates) session id as agent_session_open
// does: a new session — or an existing one that has no agent and no
// messages yet, such as a workflow stage's — is bound to def (nil: none)
// with context sc (nil: none): a new one is created with session:started
// carrying the binding, an existing one logs agent_bound; any other
// existing one must be bound to the same agent, and sc replaces its
// context. Everything is checked before
// anything is written.
func openBound(thread *starlark.Thread, st *vm.State, fn, id string, def *agent.Definition, sc *agent.SessionContext, opts sessions.OpenOptions) error {
	ctx := vm.ContextOf(thread)
	bound := false // an existing unused session is bound
	if def != nil || sc != nil {
		exists, err := st.Store.Exists(ctx, id)
		if err != nil {
			return fail(fn, err)
		}
		fresh := !exists
		if exists {
			existing, err := bindingOf(ctx, st, id)
			if err != nil {
				return fail(fn, err)
			}
			if fresh, err = unusedUnbound(ctx, st, id, existing, def); err != nil {
				return fail(fn, err)
			}
			if !fresh {
				if err := checkRebind(fn, id, existing, def); err != nil {
					return err
				}
			}
		}
		if fresh {
			opts.Info.Metadata = sessions.MergeMetadata(opts.Info.Metadata, bindMetadata(def, sc))
			opts.Info.Started = startedData(def, sc)
			bound = exists
		} else if sc != nil {
			opts.Info.Metadata = sessions.MergeMetadata(opts.Info.Metadata, map[string]any{metaContext: sc.Map()})
		}
	}
	if _, err := st.Store.OpenWith(ctx, id, opts); err != nil {
		return fail(fn, err)
	}
	if bound {
		events, err := st.Store.Apply(ctx, id, &sessions.Change{Events: []sessions.Event{sessions.NewEvent(agent.EventAgentBound, startedData(def, sc))}})
		if err != nil {
			return fail(fn, err)
		}
		return deliver(thread, st.Store, events)
	}
	return nil
}

// unusedUnbound reports whether an existing session may still be bound
// to def: it has no agent and no messages.
func unusedUnbound(ctx context.Context, st *vm.State, id string, existing *binding, def *agent.Definition) (bool, error) {
	if def == nil || existing != nil && existing.def != nil {
		return false, nil
	}
	n, err := st.Store.Length(ctx, id)
	return n == 0, err
}

func sessionUpdate(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var titleV, metaV, contextV starlark.Value = starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "title?", &titleV, "metadata?", &metaV, "context?", &contextV); err != nil {
		return nil, err
	}
	info, err := sessionInfo(b.Name(), titleV, metaV)
	if err != nil {
		return nil, err
	}
	sc, err := contextArg(thread, b.Name(), contextV)
	if err != nil {
		return nil, err
	}
	if sc != nil {
		info.Metadata = sessions.MergeMetadata(info.Metadata, map[string]any{metaContext: sc.Map()})
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	events, err := st.Store.SetInfo(vm.ContextOf(thread), id, info)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.None, deliver(thread, st.Store, events)
}

func sessionExists(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		ok, err := st.Store.Exists(ctx, id)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		return starlark.Bool(ok), nil
	})
}

func sessionLength(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		n, err := st.Store.Length(ctx, id)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		return starlark.MakeInt(n), nil
	})
}

func sessionSnapshot(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		rec, err := st.Store.Snapshot(ctx, id)
		if isNotFound(err) {
			return starlark.None, nil
		}
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		if rec.MaxTurns == 0 && st.MaxTurns > 0 {
			rec.MaxTurns = st.MaxTurns
		}
		return recordToStarlark(rec), nil
	})
}

func sessionReset(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		events, err := st.Store.Update(ctx, id, func(v message.View) (*sessions.Change, error) {
			return &sessions.Change{Replace: true, SetSummary: true,
				Events: []sessions.Event{sessions.NewEvent(sessions.EventReset, map[string]any{"dropped": int64(v.Len())})}}, nil
		})
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		return starlark.None, deliver(thread, st.Store, events)
	})
}

func sessionFork(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src string
	var dstv starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &src, "dst?", &dstv); err != nil {
		return nil, err
	}
	return fork(thread, b.Name(), src, dstv, sessions.ForkOptions{KeepFirst: -1})
}

func sessionForkAt(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src string
	var keepFirst int
	var dstv starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &src, "keep_first", &keepFirst, "dst?", &dstv); err != nil {
		return nil, err
	}
	if err := nonNegative(b.Name(), "keep_first", keepFirst); err != nil {
		return nil, err
	}
	return fork(thread, b.Name(), src, dstv, sessions.ForkOptions{KeepFirst: keepFirst, BranchedAt: true})
}

func fork(thread *starlark.Thread, fn, src string, dstv starlark.Value, opts sessions.ForkOptions) (starlark.Value, error) {
	dst, given, err := optionalID(fn, "dst", dstv)
	if err != nil {
		return nil, err
	}
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, err
	}
	if !given {
		dst = st.NewID()
	}
	// the child keeps the source's binding: its session:started says so
	b, err := bindingOf(vm.ContextOf(thread), st, src)
	if err != nil {
		return nil, fail(fn, err)
	}
	opts.Started = b.started()
	events, err := st.Store.Fork(vm.ContextOf(thread), src, dst, opts)
	if err != nil {
		return nil, fail(fn, err)
	}
	if err := deliver(thread, st.Store, events); err != nil {
		return nil, err
	}
	return starlark.String(dst), nil
}

func sessionTrim(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var keepLast int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "keep_last", &keepLast); err != nil {
		return nil, err
	}
	if err := nonNegative(b.Name(), "keep_last", keepLast); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	kept := 0
	events, err := st.Store.Update(vm.ContextOf(thread), id, func(v message.View) (*sessions.Change, error) {
		drop := sessions.TrimDrop(v, keepLast)
		kept = v.Len() - drop
		return &sessions.Change{DropFirst: drop, Events: []sessions.Event{sessions.NewEvent(sessions.EventTrim,
			map[string]any{"keep_last": int64(keepLast), "dropped": int64(drop), "kept": int64(kept)})}}, nil
	})
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	if err := deliver(thread, st.Store, events); err != nil {
		return nil, err
	}
	return starlark.MakeInt(kept), nil
}

func sessionRewind(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	turns := 1
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "turns?", &turns); err != nil {
		return nil, err
	}
	if turns < 1 {
		return nil, fmt.Errorf("%s: 'turns' must be >= 1", b.Name())
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	kept := 0
	events, err := st.Store.Update(vm.ContextOf(thread), id, func(v message.View) (*sessions.Change, error) {
		drop, err := sessions.RewindDrop(v, turns)
		if err != nil {
			return nil, err
		}
		kept = v.Len() - drop
		return &sessions.Change{DropLast: drop, Events: []sessions.Event{sessions.NewEvent(sessions.EventRewind,
			map[string]any{"turns": int64(turns), "dropped": int64(drop), "kept": int64(kept)})}}, nil
	})
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	if err := deliver(thread, st.Store, events); err != nil {
		return nil, err
	}
	return starlark.MakeInt(kept), nil
}

func sessionInject(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var msgv starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "message", &msgv); err != nil {
		return nil, err
	}
	msg, err := messageFromStarlark(b.Name(), msgv)
	if err != nil {
		return nil, err
	}
	// An injected message is a new message of this session: a given id
	// and created_at (a dict from a snapshot) give way to new ones.
	msg.ID, msg.CreatedAt = "", time.Time{}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	events, err := st.Store.Apply(vm.ContextOf(thread), id, &sessions.Change{Append: []message.Message{msg}})
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.None, deliver(thread, st.Store, events)
}

func sessionClose(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		if err := st.Store.Close(ctx, id); err != nil {
			return nil, fail(b.Name(), err)
		}
		return starlark.None, nil
	})
}

func sessionAncestry(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return idCall(thread, b, args, kwargs, func(st *vm.State, ctx context.Context, id string) (starlark.Value, error) {
		l, err := st.Store.Ancestry(ctx, id)
		if isNotFound(err) {
			return starlark.None, nil
		}
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		d := starlark.NewDict(3)
		_ = d.SetKey(starlark.String("parent_id"), optionalString(l.ParentID))
		children := make([]starlark.Value, len(l.ChildIDs))
		for i, c := range l.ChildIDs {
			children[i] = starlark.String(c)
		}
		_ = d.SetKey(starlark.String("child_ids"), starlark.NewList(children))
		_ = d.SetKey(starlark.String("root_id"), starlark.String(l.RootID))
		return d, nil
	})
}

func sessionCurrentID(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	if id, ok := currentSession(thread); ok {
		return starlark.String(id), nil
	}
	return starlark.None, nil
}

func subscribe(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id string
	var cb starlark.Callable
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "callback", &cb); err != nil {
		return nil, err
	}
	if err := vm.CheckArity(cb, "event"); err != nil {
		return nil, fmt.Errorf("%s: callback: %w", b.Name(), err)
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if err := st.Store.Subscribe(vm.ContextOf(thread), id, cb); err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.None, nil
}

func injectFeedback(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var id, kind, content string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "id", &id, "kind", &kind, "content", &content); err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, fmt.Errorf("%s: 'kind' must not be empty", b.Name())
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	msg := message.Message{Role: message.RoleUser, Text: content, Metadata: map[string]any{"feedback_kind": kind}}
	if err := st.Store.QueueFeedback(vm.ContextOf(thread), id, msg); err != nil {
		return nil, fail(b.Name(), err)
	}
	return starlark.None, nil
}

// loopFrame is a running agent loop, as agent_session_current_id and
// agent_spawn see it.
type loopFrame struct {
	sessionID string
	store     *sessions.Store // the VM's store, or an anonymous loop's own
	// provider, model, baseURL and apiVersion are the loop's options (""
	// if unset).
	provider, model, baseURL, apiVersion string
	maxIterations                        int
	iterations                           int // turns started so far
	// childIterations are the iterations its sub-agents used (or hold,
	// while they run): see childBudget.
	childIterations int
	depth           int           // 1 for a top-level loop
	budgets         []*llm.Budget // the cost budgets its calls count against
	// bound is the session's binding (nil: none): spawn_subagent finds
	// the agent's specialists and the context its children inherit here.
	bound *binding
}

// currentLoop returns the innermost running agent loop.
func currentLoop(thread *starlark.Thread) *loopFrame {
	f, _ := vm.CurrentLoop(thread).(*loopFrame)
	return f
}

// currentSession returns the session of the innermost running agent loop.
func currentSession(thread *starlark.Thread) (string, bool) {
	if f := currentLoop(thread); f != nil {
		return f.sessionID, true
	}
	return "", false
}

// pushLoop makes f the current loop of thread until the returned
// function is called.
func pushLoop(thread *starlark.Thread, f *loopFrame) (pop func()) {
	return vm.PushLoop(thread, f)
}
