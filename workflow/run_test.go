package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// fakeExec answers stages from per-node functions and records the calls.
type fakeExec struct {
	fns   map[string]func(*Stage) (*StageResult, error)
	calls []string
}

func (f *fakeExec) RunStage(ctx context.Context, s *Stage) (*StageResult, error) {
	f.calls = append(f.calls, s.Node.Name)
	if fn := f.fns[s.Node.Name]; fn != nil {
		return fn(s)
	}
	return &StageResult{Output: s.Node.Name + ": " + s.Prompt}, nil
}

func newStore(t *testing.T) *sessions.Store {
	t.Helper()
	st, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func fixedClock() func() time.Time {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { now = now.Add(time.Millisecond); return now }
}

func ids() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("run-%d", n) }
}

func mustGraph(t *testing.T, spec map[string]any) *Graph {
	t.Helper()
	g, err := Decode(spec)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func nodesOf(r *Run) string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Node+":"+s.Status)
	}
	return strings.Join(out, " ")
}

func TestExecuteTriage(t *testing.T) {
	store := newStore(t)
	reviews := 0
	ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){
		"classify": func(s *Stage) (*StageResult, error) { return &StageResult{Output: "a bug"}, nil },
		"fix": func(s *Stage) (*StageResult, error) {
			// the stage session exists and carries the stage events
			if _, err := store.Length(context.Background(), s.SessionID); err != nil {
				return nil, err
			}
			return &StageResult{Output: "patched", Usage: Usage{InputTokens: 10, OutputTokens: 2}}, nil
		},
		"review": func(s *Stage) (*StageResult, error) {
			reviews++
			// review shares the session "work" with fix
			store.Apply(context.Background(), s.SessionID, &sessions.Change{Append: []message.Message{{Role: "user", Text: "x"}}})
			if reviews < 2 {
				return &StageResult{Output: "needs work"}, nil
			}
			return &StageResult{Output: "LGTM"}, nil
		},
		"report": func(s *Stage) (*StageResult, error) {
			return &StageResult{Output: "report of " + s.Outputs["review"], Vars: map[string]any{"reported": true}}, nil
		},
	}}
	g := mustGraph(t, triage())
	// review requires a transcript in "work": give it one
	store.Open(context.Background(), "work", 0)
	store.Apply(context.Background(), "work", &sessions.Change{Append: []message.Message{{Role: "user", Text: "hi"}}})
	var events []string
	r, err := Execute(context.Background(), Options{Graph: g, Task: "crash on start", Executor: ex, Store: store, Clock: fixedClock(), NewID: ids(),
		Vars:    map[string]any{"team": "core"},
		OnEvent: func(e *Event) error { events = append(events, e.Type+":"+e.Node); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nodesOf(r), "classify:done fix:done review:done fix:done review:done report:done"; got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
	if r.Status != StatusCompleted || r.Output != "report of LGTM" || r.Vars["reported"] != true || r.Vars["team"] != "core" || r.Next != "" {
		t.Fatalf("run %+v", r)
	}
	if r.Steps[1].SessionID != "work" || r.Steps[0].SessionID != "" || r.Steps[1].Usage.InputTokens != 10 {
		t.Fatalf("steps %+v", r.Steps)
	}
	if events[0] != "workflow_start:classify" || events[len(events)-1] != "workflow_end:report" || len(events) != 2+2*6 {
		t.Fatalf("events %v", events)
	}
	snap, _ := store.Snapshot(context.Background(), "work")
	var logged []string
	for _, e := range snap.Events {
		if strings.HasPrefix(e.Type, "stage_") {
			logged = append(logged, fmt.Sprintf("%s:%v", e.Type, e.Data["node"]))
		}
	}
	if len(logged) != 8 || logged[0] != "stage_start:fix" {
		t.Fatalf("session log %v", logged)
	}
	// the record in the store is the run
	stored, err := Load(context.Background(), store, r.ID)
	if err != nil || nodesOf(stored) != nodesOf(r) || stored.Status != StatusCompleted || stored.Output != r.Output || stored.Vars["reported"] != true {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	// a completed run is returned as recorded, running nothing
	ex.calls = nil
	again, err := Execute(context.Background(), Options{Graph: g, Task: "crash on start", RunID: r.ID, Executor: ex, Store: store, Clock: fixedClock()})
	if err != nil || len(ex.calls) != 0 || nodesOf(again) != nodesOf(r) {
		t.Fatalf("re-run: %v calls %v", err, ex.calls)
	}
}

func linear(n int, mode string) map[string]any {
	nodes := map[string]any{}
	var edges []any
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%04d", i)
		if mode == "fn" {
			nodes[name] = map[string]any{"mode": "fn", "fn": "f.star:f"}
		} else {
			nodes[name] = map[string]any{"mode": mode, "prompt": "step {output}"}
		}
		if i > 0 {
			edges = append(edges, map[string]any{"from": fmt.Sprintf("s%04d", i-1), "to": name})
		}
	}
	return map[string]any{"name": "linear", "entry": "s0000", "nodes": nodes, "edges": edges}
}

func TestExecuteStops(t *testing.T) {
	ctx := context.Background()
	t.Run("max_steps", func(t *testing.T) {
		store := newStore(t)
		g := mustGraph(t, linear(5, "agent"))
		r, err := Execute(ctx, Options{Graph: g, Executor: &fakeExec{}, Store: store, NewID: ids(), MaxSteps: 3})
		if err != nil || r.Status != StatusMaxSteps || len(r.Steps) != 3 || r.Next != "s0003" {
			t.Fatalf("%v %+v", err, r)
		}
		// resumed with a higher limit, it finishes without rerunning
		ex := &fakeExec{}
		r, err = Execute(ctx, Options{Graph: g, RunID: r.ID, Executor: ex, Store: store, MaxSteps: 10})
		if err != nil || r.Status != StatusCompleted || strings.Join(ex.calls, ",") != "s0003,s0004" {
			t.Fatalf("%v %+v %v", err, r, ex.calls)
		}
	})
	t.Run("stage failure", func(t *testing.T) {
		store := newStore(t)
		g := mustGraph(t, linear(3, "agent"))
		fail := true
		ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){"s0001": func(s *Stage) (*StageResult, error) {
			if fail {
				return nil, errors.New("boom")
			}
			return &StageResult{Output: "ok"}, nil
		}}}
		r, err := Execute(ctx, Options{Graph: g, Executor: ex, Store: store, NewID: ids()})
		if err != nil || r.Status != StatusFailed || r.Error != "stage 's0001': boom" || nodesOf(r) != "s0000:done s0001:failed" || r.Steps[1].Error != "boom" {
			t.Fatalf("%v %+v", err, r)
		}
		fail = false
		ex.calls = nil
		r, err = Execute(ctx, Options{Graph: g, RunID: r.ID, Executor: ex, Store: store})
		if err != nil || r.Status != StatusCompleted || strings.Join(ex.calls, ",") != "s0001,s0002" || r.Error != "" {
			t.Fatalf("%v %+v %v", err, r, ex.calls)
		}
	})
	t.Run("output contract", func(t *testing.T) {
		spec := linear(2, "llm")
		spec["nodes"].(map[string]any)["s0000"].(map[string]any)["output_contract"] = map[string]any{
			"json_schema": map[string]any{"type": "object", "required": []any{"severity"}, "properties": map[string]any{"severity": map[string]any{"enum": []any{"low", "high"}}}}}
		g := mustGraph(t, spec)
		for out, want := range map[string]string{
			`{"severity": "low"}`:  "",
			`not json`:             "output_contract: the output is not JSON",
			`{"severity": "huge"}`: "output_contract: ",
			`{}`:                   "output_contract: ",
		} {
			ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){"s0000": func(*Stage) (*StageResult, error) { return &StageResult{Output: out}, nil }}}
			r, err := Execute(ctx, Options{Graph: g, Executor: ex, Store: newStore(t), NewID: ids()})
			if err != nil {
				t.Fatal(err)
			}
			if want == "" && r.Status != StatusCompleted || want != "" && (r.Status != StatusFailed || !strings.Contains(r.Error, want)) {
				t.Errorf("%s: %s %q", out, r.Status, r.Error)
			}
		}
	})
	t.Run("require transcript", func(t *testing.T) {
		spec := linear(2, "agent")
		spec["nodes"].(map[string]any)["s0001"].(map[string]any)["input_contract"] = map[string]any{"require_transcript": true}
		spec["nodes"].(map[string]any)["s0001"].(map[string]any)["model_policy"] = map[string]any{"session_id": "ghost"}
		_, err := Execute(ctx, Options{Graph: mustGraph(t, spec), Executor: &fakeExec{}, Store: newStore(t), NewID: ids()})
		if err == nil || err.Error() != "workflow stage 's0001' requires an existing session 'ghost' with messages (input_contract.require_transcript)" {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("other graph", func(t *testing.T) {
		store := newStore(t)
		r, _ := Execute(ctx, Options{Graph: mustGraph(t, linear(2, "agent")), Executor: &fakeExec{}, Store: store, NewID: ids(), MaxSteps: 1})
		_, err := Execute(ctx, Options{Graph: mustGraph(t, linear(3, "agent")), RunID: r.ID, Executor: &fakeExec{}, Store: store})
		if !errors.Is(err, ErrGraphChanged) || !strings.Contains(err.Error(), "run 'run-1' was started with another graph") {
			t.Fatalf("got %v", err)
		}
		_, err = Execute(ctx, Options{Graph: mustGraph(t, linear(2, "agent")), Task: "other", RunID: r.ID, Executor: &fakeExec{}, Store: store})
		if err == nil || !strings.Contains(err.Error(), "was started with another task") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		store := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){"s0001": func(*Stage) (*StageResult, error) {
			cancel()
			return nil, context.Canceled
		}}}
		g := mustGraph(t, linear(3, "agent"))
		r, err := Execute(cctx, Options{Graph: g, Executor: ex, Store: store, NewID: ids()})
		if err != nil || r.Status != StatusCancelled || nodesOf(r) != "s0000:done s0001:cancelled" || r.Next != "s0001" {
			t.Fatalf("%v %+v", err, r)
		}
		stored, _ := Load(ctx, store, r.ID)
		if stored.Status != StatusCancelled {
			t.Fatalf("stored status %s", stored.Status)
		}
		ex.fns = nil
		ex.calls = nil
		r, err = Execute(ctx, Options{Graph: g, RunID: r.ID, Executor: ex, Store: store})
		if err != nil || r.Status != StatusCompleted || strings.Join(ex.calls, ",") != "s0001,s0002" {
			t.Fatalf("%v %+v", err, r)
		}
	})
	t.Run("conditions see the env", func(t *testing.T) {
		spec := map[string]any{"name": "env", "entry": "a", "nodes": map[string]any{
			"a": map[string]any{"mode": "fn", "fn": "x"}, "b": map[string]any{"mode": "fn", "fn": "x"}, "c": map[string]any{"mode": "fn", "fn": "x"}},
			"edges": []any{
				map[string]any{"from": "a", "to": "a", "when": `visits.a < 3 && vars.go == true && steps == visits.a && node == "a" && status == "done" && task == "t"`},
				map[string]any{"from": "a", "to": "b", "when": `outputs.a == "a"`},
				map[string]any{"from": "a", "to": "c"},
			}}
		ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){"a": func(*Stage) (*StageResult, error) { return &StageResult{Output: "a"}, nil }}}
		r, err := Execute(ctx, Options{Graph: mustGraph(t, spec), Task: "t", Vars: map[string]any{"go": true}, Executor: ex, Store: newStore(t), NewID: ids()})
		if err != nil || nodesOf(r) != "a:done a:done a:done b:done" {
			t.Fatalf("%v %s", err, nodesOf(r))
		}
	})
}

func TestStableSessionIDs(t *testing.T) {
	store := newStore(t)
	spec := linear(2, "agent")
	spec["edges"] = append(spec["edges"].([]any), map[string]any{"from": "s0001", "to": "s0000", "when": "visits.s0000 < 2"})
	g := mustGraph(t, spec)
	r, err := Execute(context.Background(), Options{Graph: g, RunID: "r1", Executor: &fakeExec{}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	var sids []string
	for _, s := range r.Steps {
		sids = append(sids, s.SessionID)
	}
	if strings.Join(sids, ",") != "r1/s0000,r1/s0001,r1/s0000,r1/s0001" {
		t.Fatalf("session ids %v", sids)
	}
}

// TestExecuteExportedShape: an input stage passes the task on and an
// output stage the previous output, neither through the executor; a
// session_id with {run_id} names a session of the run, so two runs of
// the graph use two sessions.
func TestExecuteExportedShape(t *testing.T) {
	g := mustGraph(t, map[string]any{"name": "w", "entry": "input",
		"nodes": map[string]any{"input": map[string]any{"mode": "input"}, "output": map[string]any{"mode": "output"},
			"turn-1": map[string]any{"mode": "agent", "prompt_template": "got {output}", "model_policy": map[string]any{"session_id": ExportSession}}},
		"edges": []any{map[string]any{"from": "input", "to": "turn-1"}, map[string]any{"from": "turn-1", "to": "output"}}})
	ex := &fakeExec{}
	store := newStore(t)
	ids := ids()
	var sessionsUsed []string
	for range 2 {
		r, err := Execute(context.Background(), Options{Graph: g, Task: "the task", Executor: ex, Store: store, NewID: ids})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != StatusCompleted || r.Output != "turn-1: got the task" || nodesOf(r) != "input:done turn-1:done output:done" {
			t.Fatalf("run %s: %s, output %q, steps %s", r.ID, r.Status, r.Output, nodesOf(r))
		}
		if r.Steps[0].SessionID != "" || r.Steps[2].SessionID != "" || r.Steps[1].SessionID != r.ID+"/conversation" {
			t.Errorf("sessions of the steps: %q %q %q", r.Steps[0].SessionID, r.Steps[1].SessionID, r.Steps[2].SessionID)
		}
		sessionsUsed = append(sessionsUsed, r.Steps[1].SessionID)
	}
	if sessionsUsed[0] == sessionsUsed[1] {
		t.Errorf("two runs shared the session %s", sessionsUsed[0])
	}
	if strings.Join(ex.calls, " ") != "turn-1 turn-1" {
		t.Errorf("the executor ran %v", ex.calls)
	}
}
