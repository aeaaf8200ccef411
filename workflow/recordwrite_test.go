package workflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// countingRuns is a memory backend that counts the writes of run
// records.
type countingRuns struct {
	*sessions.MemoryBackend
	creates, updates int
}

func (c *countingRuns) CreateRun(ctx context.Context, rec *sessions.RunRecord) error {
	c.creates++
	return c.MemoryBackend.CreateRun(ctx, rec)
}

func (c *countingRuns) UpdateRun(ctx context.Context, id string, u *sessions.RunUpdate) error {
	c.updates++
	return c.MemoryBackend.UpdateRun(ctx, id, u)
}

func withRecordAfter(t *testing.T, d time.Duration) {
	old := recordAfter
	recordAfter = d
	t.Cleanup(func() { recordAfter = old })
}

// TestRecordWrites: the record of a stage without a session waits for
// the run's next write while stages end within recordAfter of the last
// one; an observer (OnEvent) only learns of a stage whose record is
// stored; a stage with a session writes its record with its stage_end,
// after the records of the stages before it are written.
func TestRecordWrites(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, g *Graph, onEvent func(*Event) error) (*Run, *countingRuns, *sessions.Store) {
		b := &countingRuns{MemoryBackend: sessions.NewMemoryBackend()}
		store, err := sessions.NewStore(b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Execute(ctx, Options{Graph: g, Executor: &fakeExec{}, Store: store, NewID: ids(), OnEvent: onEvent})
		if err != nil || r.Status != StatusCompleted {
			t.Fatalf("%v %+v", err, r)
		}
		stored, err := Load(ctx, store, r.ID)
		if err != nil || nodesOf(stored) != nodesOf(r) || stored.Status != StatusCompleted || stored.Output != r.Output {
			t.Fatalf("stored %+v, %v; ran %s", stored, err, nodesOf(r))
		}
		return r, b, store
	}
	t.Run("quick fn stages", func(t *testing.T) {
		withRecordAfter(t, time.Hour)
		_, b, _ := run(t, mustGraph(t, linear(20, "fn")), nil)
		if b.creates != 1 || b.updates != 1 {
			t.Fatalf("%d creates and %d updates, want the run's creation and its end", b.creates, b.updates)
		}
	})
	t.Run("every stage", func(t *testing.T) {
		withRecordAfter(t, 0)
		_, b, _ := run(t, mustGraph(t, linear(20, "fn")), nil)
		if b.updates != 21 {
			t.Fatalf("%d updates, want one a stage and the run's end", b.updates)
		}
	})
	t.Run("observed", func(t *testing.T) {
		withRecordAfter(t, time.Hour)
		b := &countingRuns{MemoryBackend: sessions.NewMemoryBackend()}
		store, err := sessions.NewStore(b)
		if err != nil {
			t.Fatal(err)
		}
		ends := 0
		onEvent := func(e *Event) error {
			if e.Type != EventStageEnd {
				return nil
			}
			ends++
			stored, err := Load(ctx, store, e.RunID)
			if err != nil || len(stored.Steps) != e.Step+1 {
				return fmt.Errorf("stage_end of step %d: the record has %d steps (%v)", e.Step, len(stored.Steps), err)
			}
			return nil
		}
		g := mustGraph(t, linear(10, "fn"))
		r, err := Execute(ctx, Options{Graph: g, Executor: &fakeExec{}, Store: store, NewID: ids(), OnEvent: onEvent})
		if err != nil || r.Status != StatusCompleted || ends != 10 {
			t.Fatalf("%v %+v, %d stage_end", err, r, ends)
		}
	})
	t.Run("stages with sessions", func(t *testing.T) {
		withRecordAfter(t, time.Hour)
		// fn, agent, fn, agent, fn
		spec := linear(5, "fn")
		nodes := spec["nodes"].(map[string]any)
		for _, n := range []string{"s0001", "s0003"} {
			nodes[n] = map[string]any{"mode": "agent", "prompt": "go"}
		}
		g := mustGraph(t, spec)
		b := &countingRuns{MemoryBackend: sessions.NewMemoryBackend()}
		store, err := sessions.NewStore(b)
		if err != nil {
			t.Fatal(err)
		}
		ex := &fakeExec{fns: map[string]func(*Stage) (*StageResult, error){}}
		for _, n := range []string{"s0001", "s0003"} {
			ex.fns[n] = func(s *Stage) (*StageResult, error) {
				// the stages before this one are recorded
				stored, err := Load(ctx, store, s.RunID)
				if err != nil || len(stored.Steps) != int(s.Node.Name[4]-'0') {
					return nil, fmt.Errorf("%s starts with %d steps recorded (%v)", s.Node.Name, len(stored.Steps), err)
				}
				return &StageResult{Output: "ok"}, nil
			}
		}
		r, err := Execute(ctx, Options{Graph: g, Executor: ex, Store: store, NewID: ids()})
		if err != nil || r.Status != StatusCompleted || len(r.Steps) != 5 {
			t.Fatalf("%v %+v", err, r)
		}
		// creation; s0000 before s0001; s0001's end; s0002 before
		// s0003; s0003's end; s0004 with the run's end
		if b.updates != 5 {
			t.Fatalf("%d updates, want 5", b.updates)
		}
		// the agent stages' stage_end events are in their sessions
		for _, n := range []string{"s0001", "s0003"} {
			rec, err := store.Snapshot(ctx, r.ID+"/"+n)
			if err != nil {
				t.Fatal(err)
			}
			if last := rec.Events[len(rec.Events)-1]; last.Type != EventStageEnd {
				t.Fatalf("%s: last event %s", n, last.Type)
			}
		}
	})
}

// TestStageSessionLeftOver: a new run's agent stage creates its session
// without looking for it first; one left over under that id (a run of
// the same id whose record is gone) is opened as it is.
func TestStageSessionLeftOver(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	if _, err := store.Open(ctx, "run-1/s0001", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Apply(ctx, "run-1/s0001", &sessions.Change{Append: []message.Message{{Role: "user", Text: "before"}}}); err != nil {
		t.Fatal(err)
	}
	r, err := Execute(ctx, Options{Graph: mustGraph(t, linear(3, "agent")), Executor: &fakeExec{}, Store: store, NewID: ids()})
	if err != nil || r.ID != "run-1" || r.Status != StatusCompleted {
		t.Fatalf("%v %+v", err, r)
	}
	for _, n := range []string{"s0000", "s0001", "s0002"} {
		rec, err := store.Snapshot(ctx, "run-1/"+n)
		if err != nil {
			t.Fatal(err)
		}
		if n == "s0001" && (len(rec.Messages) != 1 || rec.Messages[0].Text != "before") {
			t.Fatalf("%s: %+v", n, rec.Messages)
		}
		if last := rec.Events[len(rec.Events)-1]; last.Type != EventStageEnd && last.Type != EventWorkflowEnd {
			t.Fatalf("%s: last event %s", n, last.Type)
		}
		// the sessions the run created start with the stage's
		// session:started; the left-over one started before, plainly
		first := rec.Events[0]
		want := fmt.Sprint(map[string]any{"run_id": "run-1", "stage": n, "workflow": r.Workflow})
		if n == "s0001" {
			want = "map[]"
		}
		if first.Type != sessions.EventSessionStarted || fmt.Sprint(first.Data) != want {
			t.Fatalf("%s: first event %s %v, want session:started %s", n, first.Type, first.Data, want)
		}
	}
}
