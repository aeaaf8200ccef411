package workflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/sessions"
)

// timed wraps an executor and adds up the time spent inside stages, so a
// benchmark can report the engine's own time per stage: Execute's time
// minus the stages' work.
type timed struct {
	inner Executor
	spent time.Duration
}

func (t *timed) RunStage(ctx context.Context, s *Stage) (*StageResult, error) {
	start := time.Now()
	res, err := t.inner.RunStage(ctx, s)
	t.spent += time.Since(start)
	return res, err
}

// fnStages answers every stage at once: the work of a trivial fn stage.
type fnStages struct{}

func (fnStages) RunStage(_ context.Context, s *Stage) (*StageResult, error) {
	return &StageResult{Output: s.Node.Name}, nil
}

// agentStages runs an agent loop with the mock provider on the stage
// session: the work of an agent stage.
type agentStages struct {
	store    *sessions.Store
	provider llm.Provider
}

func (a *agentStages) RunStage(ctx context.Context, s *Stage) (*StageResult, error) {
	res, err := agent.Run(ctx, agent.Config{Store: a.store, SessionID: s.SessionID, Prompt: s.Prompt,
		Chain: []llm.Target{{Provider: a.provider}}, MaxIterations: 5})
	if err != nil {
		return nil, err
	}
	return &StageResult{Output: res.VisibleText, Status: string(res.Status)}, nil
}

// benchLinear runs a linear workflow of n stages b.N times and reports
// the engine's time per stage (engine-µs/stage: everything Execute does
// besides the stages' work: prompt rendering, stage session and events,
// the run record written after every stage to the store, edge
// conditions) and the stages' own time (stage-µs/stage).
func benchLinear(b *testing.B, n int, mode string, newExec func(*sessions.Store) Executor) {
	g, err := Decode(linear(n, mode))
	if err != nil {
		b.Fatal(err)
	}
	var engine, work time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(4*n))
		if err != nil {
			b.Fatal(err)
		}
		ex := &timed{inner: newExec(store)}
		start := time.Now()
		r, err := Execute(context.Background(), Options{Graph: g, Task: "bench", RunID: fmt.Sprintf("run-%d", i), MaxSteps: n,
			Executor: ex, Store: store})
		total := time.Since(start)
		if err != nil || r.Status != StatusCompleted || len(r.Steps) != n {
			b.Fatalf("run: %v %s %d steps", err, r.Status, len(r.Steps))
		}
		engine += total - ex.spent
		work += ex.spent
	}
	runs := float64(b.N * n)
	b.ReportMetric(float64(engine.Microseconds())/runs, "engine-µs/stage")
	b.ReportMetric(float64(work.Microseconds())/runs, "stage-µs/stage")
}

// BenchmarkLinearFn: linear workflows of fn stages, 100 and 1,000 long;
// engine-µs/stage should be the same for both (flat as the run grows).
func BenchmarkLinearFn(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("stages=%d", n), func(b *testing.B) {
			benchLinear(b, n, "fn", func(*sessions.Store) Executor { return fnStages{} })
		})
	}
}

// BenchmarkLinearAgent: linear workflows of agent stages with the mock
// provider, 10 and 100 long.
func BenchmarkLinearAgent(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("stages=%d", n), func(b *testing.B) {
			benchLinear(b, n, "agent", func(store *sessions.Store) Executor {
				return &agentStages{store: store, provider: mock.New().Wrap("mock", nil, nil)}
			})
		})
	}
}
