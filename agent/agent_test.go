package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// scripted is a fake provider that replays responses in order.
type scripted struct {
	mu    sync.Mutex
	name  string
	resps []any // *llm.Response or error
	reqs  []*llm.Request
}

func (p *scripted) Name() string { return p.name }

func (p *scripted) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	if len(p.resps) == 0 {
		return &llm.Response{Text: "default"}, nil
	}
	r := p.resps[0]
	p.resps = p.resps[1:]
	if err, ok := r.(error); ok {
		return nil, err
	}
	return r.(*llm.Response), nil
}

// fakeTool answers with a fixed output or error.
type fakeTool struct {
	name  string
	out   string
	err   error
	calls int
}

func (t *fakeTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Parameters: map[string]any{"type": "object", "properties": map[string]any{
		"n": map[string]any{"type": "integer"}}}}
}

func (t *fakeTool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	t.calls++
	return t.out, t.err
}

func callTool(name string, args map[string]any) *llm.Response {
	return &llm.Response{ToolCalls: []message.ToolCall{{ID: "c-" + name, Name: name, Arguments: args}}}
}

func newStore(t *testing.T, id string) *sessions.Store {
	t.Helper()
	s, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

func config(store *sessions.Store, id string, p llm.Provider, tools ...Tool) Config {
	return Config{Store: store, SessionID: id, Prompt: "go", Chain: []llm.Target{{Provider: p}}, Tools: tools,
		MaxIterations: 10, MaxNudges: 2, ToolErrors: ToolErrorsReport}
}

func TestToolLoop(t *testing.T) {
	store := newStore(t, "s")
	tool := &fakeTool{name: "count", out: "42"}
	p := &scripted{name: "fake", resps: []any{callTool("count", map[string]any{"n": int64(1)}), &llm.Response{Text: "the answer is 42"}}}
	var events []string
	cfg := config(store, "s", p, tool)
	cfg.Hooks.Emit = func(e sessions.Event) error {
		switch {
		case e.Type == EventState && e.Data["tool"] != nil:
			events = append(events, fmt.Sprintf("state=%s(%s)", e.Data["state"], e.Data["tool"]))
		case e.Type == EventState:
			events = append(events, fmt.Sprintf("state=%s", e.Data["state"]))
		case e.Type != sessions.EventMessage:
			events = append(events, e.Type)
		}
		return nil
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusDone || res.Text != "the answer is 42" || res.Iterations != 2 || tool.calls != 1 {
		t.Fatalf("result = %+v, tool calls %d", res, tool.calls)
	}
	// state events announce each transition as it happens: they come
	// before the stored events of the step, delivered at its commit
	if got := strings.Join(events, ","); got != "state=llm_generating,turn_start,llm_call,tool_call,state=tool_executing(count),tool_result,turn_end,"+
		"state=llm_generating,turn_start,llm_call,turn_end,session:turn_completed,state=idle" {
		t.Fatalf("events = %s", got)
	}
	msgs, _ := store.Messages(context.Background(), "s")
	if err := message.Validate(msgs); err != nil || len(msgs) != 4 {
		t.Fatalf("transcript %d messages, %v", len(msgs), err)
	}
	// the second request carries the tool result
	second := p.reqs[1].Messages
	if second[len(second)-1].Role != message.RoleTool || second[len(second)-1].Text != "42" {
		t.Fatalf("second request ends with %+v", second[len(second)-1])
	}
}

func TestMessagesAreWrittenAsTheyHappen(t *testing.T) {
	store := newStore(t, "s")
	var lengths []int
	tool := &fakeTool{name: "count", out: "1"}
	p := &scripted{name: "fake", resps: []any{callTool("count", nil), &llm.Response{Text: "ok"}}}
	cfg := config(store, "s", p, tool)
	cfg.Hooks.Emit = func(e sessions.Event) error {
		if e.Type == EventToolCall {
			n, _ := store.Length(context.Background(), "s")
			lengths = append(lengths, n)
		}
		return nil
	}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lengths) != "[2]" { // prompt and assistant call stored before the tool runs
		t.Fatalf("lengths at tool_call = %v", lengths)
	}
}

func TestRaisedToolErrorHealsAndFails(t *testing.T) {
	store := newStore(t, "s")
	boom := errors.New("boom")
	tool := &fakeTool{name: "count", err: boom}
	p := &scripted{name: "fake", resps: []any{&llm.Response{ToolCalls: []message.ToolCall{
		{ID: "a", Name: "count", Arguments: map[string]any{}}, {ID: "b", Name: "count", Arguments: map[string]any{}}}}}}
	cfg := config(store, "s", p, tool)
	cfg.ToolErrors = ToolErrorsRaise
	_, err := Run(context.Background(), cfg)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	rec, _ := store.Snapshot(context.Background(), "s")
	if err := message.Validate(rec.Messages); err != nil {
		t.Fatal(err)
	}
	// the raising call's result is its own error; the call after it was
	// never run
	if rec.Status != sessions.StatusError || rec.Messages[2].Text != "boom" || !rec.Messages[2].IsError || rec.Messages[3].Text != "interrupted" {
		t.Fatalf("status %s messages %+v", rec.Status, rec.Messages)
	}
}

func TestBadArgumentsAreReportedEvenWhenRaising(t *testing.T) {
	store := newStore(t, "s")
	tool := &fakeTool{name: "count", out: "x"}
	p := &scripted{name: "fake", resps: []any{callTool("count", map[string]any{"n": "not a number"}), &llm.Response{Text: "ok"}}}
	cfg := config(store, "s", p, tool)
	cfg.ToolErrors = ToolErrorsRaise
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tool.calls != 0 || res.Failed[0] != "count" {
		t.Fatalf("tool ran with bad args: %+v", res)
	}
}

func TestContextLengthTriggersOneCompactionAndRetry(t *testing.T) {
	store := newStore(t, "s")
	p := &scripted{name: "fake", resps: []any{
		&llm.Error{Provider: "fake", Category: llm.ContextLength, Message: "too long"},
		&llm.Response{Text: "fits now"},
	}}
	for i := 0; i < 20; i++ {
		role := message.RoleUser
		if i%2 == 1 {
			role = message.RoleAssistant
		}
		if _, err := store.Apply(context.Background(), "s", &sessions.Change{Append: []message.Message{{Role: role, Text: fmt.Sprintf("old message %d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config(store, "s", p)
	opts := compact.DefaultOptions()
	opts.KeepLast = 2
	cfg.Compaction = &Compaction{Enabled: true, Options: opts, Threshold: 1 << 30}
	var triggers []string
	cfg.Hooks.Emit = func(e sessions.Event) error {
		if e.Type == EventCompaction {
			triggers = append(triggers, e.Data["trigger"].(string))
		}
		return nil
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "fits now" || fmt.Sprint(triggers) != "[context_length]" || res.Iterations != 1 || res.Compactions != 1 {
		t.Fatalf("res %+v, triggers %v", res, triggers)
	}
	if len(p.reqs[1].Messages) >= len(p.reqs[0].Messages) {
		t.Fatalf("the retry was not smaller: %d then %d messages", len(p.reqs[0].Messages), len(p.reqs[1].Messages))
	}
}

func TestStripSentinel(t *testing.T) {
	for in, want := range map[string]string{
		"done\n##DONE##":       "done",
		"##DONE##":             "",
		"all good ##DONE## ok": "all good  ok",
		"no sentinel":          "no sentinel",
	} {
		if got := StripSentinel(in); got != want {
			t.Errorf("StripSentinel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParallelLoops runs loops on different sessions of one store at
// once (go test -race checks the sharing).
func TestParallelLoops(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("s%d", i)
			if _, err := store.Open(context.Background(), id, 0); err != nil {
				t.Error(err)
				return
			}
			tool := &fakeTool{name: "count", out: "1"}
			for turn := 0; turn < 5; turn++ {
				p := &scripted{name: "fake", resps: []any{callTool("count", nil), callTool("count", nil), &llm.Response{Text: "ok"}}}
				res, err := Run(context.Background(), config(store, id, p, tool))
				if err != nil || res.Status != StatusDone {
					t.Errorf("%s: %v %+v", id, err, res)
					return
				}
			}
			if n, _ := store.Length(context.Background(), id); n != 30 {
				t.Errorf("%s has %d messages", id, n)
			}
		}(i)
	}
	wg.Wait()
}

func TestToolErrorDecidesItsOwnFate(t *testing.T) {
	refused := errors.New("path is outside the workspace")
	for _, mode := range []ToolErrors{ToolErrorsReport, ToolErrorsRaise} {
		t.Run(string(mode)+"/reported", func(t *testing.T) {
			store := newStore(t, "s")
			tool := &fakeTool{name: "count", err: &ToolError{Err: refused}}
			p := &scripted{name: "fake", resps: []any{callTool("count", nil), &llm.Response{Text: "ok"}}}
			cfg := config(store, "s", p, tool)
			cfg.ToolErrors = mode
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			msgs, _ := store.Messages(context.Background(), "s")
			if len(res.Failed) != 1 || msgs[2].Text != refused.Error() || !msgs[2].IsError {
				t.Fatalf("result %+v, tool message %+v", res, msgs[2])
			}
		})
		t.Run(string(mode)+"/fatal", func(t *testing.T) {
			store := newStore(t, "s")
			tool := &fakeTool{name: "count", err: &ToolError{Err: refused, Fatal: true}}
			p := &scripted{name: "fake", resps: []any{callTool("count", nil), &llm.Response{Text: "ok"}}}
			cfg := config(store, "s", p, tool)
			cfg.ToolErrors = mode
			if _, err := Run(context.Background(), cfg); !errors.Is(err, refused) {
				t.Fatalf("err = %v", err)
			}
			rec, _ := store.Snapshot(context.Background(), "s")
			if err := message.Validate(rec.Messages); err != nil || rec.Status != sessions.StatusError {
				t.Fatalf("status %s, %v", rec.Status, err)
			}
		})
	}
}

// durable is a memory backend that claims durability, so two stores over
// it behave like two processes sharing one database.
type durable struct{ *sessions.MemoryBackend }

func (durable) Durable() bool { return true }

// hookTool runs a function when it is called.
type hookTool struct {
	name string
	run  func()
}

func (t *hookTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}
}

func (t *hookTool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	t.run()
	return "done", nil
}

// TestLoopLosingAConflictWritesNothing runs a loop whose session another
// store (another process) writes while a tool runs: the loop fails with
// the conflict and leaves the session as the other store left it, without
// healing its tool call or marking it failed.
func TestLoopLosingAConflictWritesNothing(t *testing.T) {
	ctx := context.Background()
	b := durable{sessions.NewMemoryBackend()}
	mine, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	tool := &hookTool{name: "slow", run: func() {
		// another process opens the session, which heals the open call,
		// and goes on
		theirs, err := sessions.NewStore(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := theirs.Open(ctx, "s", 0); err != nil {
			t.Error(err)
		}
		if _, err := theirs.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "theirs"}}}); err != nil {
			t.Error(err)
		}
	}}
	p := &scripted{resps: []any{callTool("slow", map[string]any{})}}
	_, err = Run(ctx, config(mine, "s", p, tool))
	if !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	rec, err := b.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != sessions.StatusActive {
		t.Errorf("status %s, want active: the loser marked the winner's session", rec.Status)
	}
	last := rec.Messages[len(rec.Messages)-1]
	if last.Text != "theirs" {
		t.Errorf("last message %+v, want the other store's", last)
	}
	for _, e := range rec.Events {
		if e.Type == EventError || (e.Type == sessions.EventHealed && e.Data["reason"] != "interrupted") {
			t.Errorf("the loser logged %s %v on the winner's session", e.Type, e.Data)
		}
	}
	if err := message.Validate(rec.Messages); err != nil {
		t.Error(err)
	}
}

// countingBackend counts the writes reaching a memory backend.
type countingBackend struct {
	*sessions.MemoryBackend
	writes int
}

func (b *countingBackend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	b.writes++
	return b.MemoryBackend.Write(ctx, id, base, changes...)
}

// TestGroupCommit checks that the loop writes one transaction per step:
// the model step (before its tools run) and the tool step, so two per
// tool-calling iteration and one for the final reply, unless the reply's
// tools are quick (Config.QuickTool): then the reply commits with their
// results, one commit for the iteration. A tool is quick once its last
// run in the loop took less than QuickTool, so the first iteration is
// always two commits. Every event reaches the hooks only once the
// backend holds it.
func TestGroupCommit(t *testing.T) {
	for _, c := range []struct {
		name      string
		quick     time.Duration // Config.QuickTool
		sleep     time.Duration // each run of the tool
		writes    int
		writesRun string // the writes made when each tool ran
	}{
		{"never quick", -1, 0, 7, "[1 3 5]"},
		{"quick", time.Hour, 0, 5, "[1 2 3]"},
		{"slower than quick", time.Millisecond, 3 * time.Millisecond, 7, "[1 3 5]"},
	} {
		t.Run(c.name, func(t *testing.T) { groupCommit(t, c.quick, c.sleep, c.writes, c.writesRun) })
	}
}

func groupCommit(t *testing.T, quick, sleep time.Duration, wantWrites int, wantWritesAtRun string) {
	b := &countingBackend{MemoryBackend: sessions.NewMemoryBackend()}
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := store.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	const iterations = 3
	var resps []any
	for i := range iterations {
		resps = append(resps, callTool("count", map[string]any{"n": int64(i)}))
	}
	resps = append(resps, &llm.Response{Text: "done"})
	tool := &fakeTool{name: "count", out: "ok"}
	cfg := config(store, "s", &scripted{name: "fake", resps: resps}, tool)
	cfg.QuickTool = quick
	var writesAtRun []int
	tool2 := &probedTool{fakeTool: tool, before: func() {
		writesAtRun = append(writesAtRun, b.writes)
		rec, err := b.Load(ctx, "s")
		stored := err == nil && len(rec.Messages) > 0 && rec.Messages[len(rec.Messages)-1].HasToolCalls()
		if first := len(writesAtRun) == 1; !stored && (first || quick < 0 || sleep >= quick) {
			t.Errorf("run %d: a tool that is not quick runs before its call is stored", len(writesAtRun))
		}
		time.Sleep(sleep)
	}}
	cfg.Tools = []Tool{tool2}
	delivered := 0
	cfg.Hooks.Emit = func(e sessions.Event) error {
		rec, err := b.Load(ctx, "s")
		if err != nil {
			return err
		}
		if Transient(e.Type) {
			// never stored; its seq is that of an event already delivered
			if n := len(rec.Events); e.Seq > 0 && (n == 0 || rec.Events[n-1].Seq < e.Seq) {
				t.Errorf("transient %s carries seq %d, not yet stored", e.Type, e.Seq)
			}
			return nil
		}
		delivered++
		if n := len(rec.Events); n == 0 || rec.Events[n-1].Seq < e.Seq {
			t.Errorf("event %d (%s) delivered before it was stored", e.Seq, e.Type)
		}
		return nil
	}
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if b.writes != wantWrites {
		t.Errorf("%d writes for %d tool-calling iterations and a final reply, want %d", b.writes, iterations, wantWrites)
	}
	if fmt.Sprint(writesAtRun) != wantWritesAtRun {
		t.Errorf("writes when each tool ran: %v, want %s", writesAtRun, wantWritesAtRun)
	}
	rec, _ := b.Load(ctx, "s")
	// the loop delivers every event it stored, not session:started,
	// logged when the session was opened
	if delivered != len(rec.Events)-1 || rec.Events[0].Type != sessions.EventSessionStarted {
		t.Errorf("%d events delivered, %d stored (the first %s)", delivered, len(rec.Events), rec.Events[0].Type)
	}
	if err := message.Validate(rec.Messages); err != nil || len(rec.Messages) != 2*iterations+2 {
		t.Errorf("%d messages stored (%v), want %d", len(rec.Messages), err, 2*iterations+2)
	}
}

// probedTool runs before ahead of a fake tool.
type probedTool struct {
	*fakeTool
	before func()
}

func (t *probedTool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	t.before()
	return t.fakeTool.Run(ctx, call)
}

// TestStateEventsOnlyWhenHeard checks that the loop builds "state" events
// only for someone: the hooks while Listening says so, or the store's
// observers (live viewers) whatever it says.
func TestStateEventsOnlyWhenHeard(t *testing.T) {
	run := func(listening bool, observe bool) (hooked, observed int) {
		store := newStore(t, "s")
		if observe {
			defer store.Observe(func(e sessions.Event) {
				if e.Type == EventState {
					observed++
				}
			})()
		}
		tool := &fakeTool{name: "count", out: "42"}
		p := &scripted{name: "fake", resps: []any{callTool("count", map[string]any{"n": int64(1)}), &llm.Response{Text: "done"}}}
		cfg := config(store, "s", p, tool)
		cfg.Hooks.Emit = func(e sessions.Event) error {
			if e.Type == EventState {
				hooked++
			}
			return nil
		}
		cfg.Hooks.Listening = func() bool { return listening }
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		return hooked, observed
	}
	if h, o := run(false, false); h != 0 || o != 0 {
		t.Errorf("nobody listening: %d state events to the hooks, %d to observers; want none", h, o)
	}
	if h, _ := run(true, false); h != 4 {
		t.Errorf("hooks listening: %d state events, want 4", h)
	}
	if h, o := run(false, true); h != 4 || o != 4 {
		t.Errorf("an observer watching: %d state events to the hooks, %d to the observer; want 4 and 4", h, o)
	}
}

// TestToolHooks: Hooks.ToolCalled and ToolEnded see the names of
// Result.ToolCalls, Succeeded and Failed as they join them, in order.
func TestToolHooks(t *testing.T) {
	store := newStore(t, "s")
	ok, bad := &fakeTool{name: "ok", out: "x"}, &fakeTool{name: "bad", err: errors.New("no")}
	p := &scripted{name: "fake", resps: []any{
		&llm.Response{ToolCalls: []message.ToolCall{{ID: "a", Name: "ok", Arguments: map[string]any{}}, {ID: "b", Name: "bad", Arguments: map[string]any{}}}},
		callTool("nope", map[string]any{}), callTool("ok", map[string]any{"n": "x"}), callTool("ok", map[string]any{}),
		&llm.Response{Text: "done"}}}
	cfg := config(store, "s", p, ok, bad)
	var called, succeeded, failed []string
	cfg.Hooks.ToolCalled = func(name string) { called = append(called, name) }
	cfg.Hooks.ToolEnded = func(name string, f bool) {
		if f {
			failed = append(failed, name)
		} else {
			succeeded = append(succeeded, name)
		}
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, got, res []string, w ...string) {
		if !slices.Equal(got, w) || !slices.Equal(res, w) {
			t.Errorf("%s: hooks %v, result %v, want %v", what, got, res, w)
		}
	}
	want("calls", called, res.ToolCalls, "ok", "bad", "nope", "ok", "ok")
	want("succeeded", succeeded, res.Succeeded, "ok", "ok")
	want("failed", failed, res.Failed, "bad", "nope", "ok")
}
