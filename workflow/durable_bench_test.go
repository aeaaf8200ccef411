package workflow

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// durableRun runs a linear workflow of graph g (k stages) once on store
// and returns the engine's time per stage (Execute's time less the
// stages' own work, as benchLinear counts it).
func durableRun(b *testing.B, store *sessions.Store, g *Graph, k int, newExec func(*sessions.Store) Executor) time.Duration {
	ex := &timed{inner: newExec(store)}
	start := time.Now()
	r, err := Execute(context.Background(), Options{Graph: g, Task: "bench", MaxSteps: k, Executor: ex, Store: store, NewID: newRunID})
	total := time.Since(start)
	if err != nil || r.Status != StatusCompleted || len(r.Steps) != k {
		b.Fatalf("run: %v %s %d steps", err, r.Status, len(r.Steps))
	}
	return (total - ex.spent) / time.Duration(k)
}

var runIDs int

func newRunID() string {
	runIDs++
	return fmt.Sprintf("run-%d", runIDs)
}

// benchDurable runs linear workflows of mode's stages, small and large,
// on one SQLite file (durability process, the default) alternately, the order
// swapped each round, and reports the medians over rounds of the
// engine's µs per stage for each (the run record's writes, and for agent
// stages the stage session's creation and its stage_start and stage_end
// events, stage_end and the step in one commit) and of their ratio
// within a round (1 is flat), and
// the process's CPU time per stage (stages and set-up included: for
// comparing builds, as a loaded machine stretches wall times).
func benchDurable(b *testing.B, mode string, small, large int, newExec func(*sessions.Store) Executor) {
	gs, err := Decode(linear(small, mode))
	if err != nil {
		b.Fatal(err)
	}
	gl, err := Decode(linear(large, mode))
	if err != nil {
		b.Fatal(err)
	}
	backend, err := sqlite.Open(filepath.Join(b.TempDir(), "w.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	store, err := sessions.NewStore(backend)
	if err != nil {
		b.Fatal(err)
	}
	var s, l, ratio, cs, cl []float64
	// as many stages on each side: small runs large/small times; each
	// returns µs per stage of the engine and of the whole process's CPU
	runSmall := func() (float64, float64) {
		var sum time.Duration
		cpu := cpuTime(b)
		for range large / small {
			sum += durableRun(b, store, gs, small, newExec)
		}
		return float64(sum.Nanoseconds()) / float64(large/small) / 1000, float64((cpuTime(b) - cpu).Nanoseconds()) / float64(large) / 1000
	}
	runLarge := func() (float64, float64) {
		cpu := cpuTime(b)
		d := durableRun(b, store, gl, large, newExec)
		return float64(d.Nanoseconds()) / 1000, float64((cpuTime(b) - cpu).Nanoseconds()) / float64(large) / 1000
	}
	for i := 0; b.Loop(); i++ {
		var x, y, cx, cy float64
		if i%2 == 0 {
			x, cx = runSmall()
			y, cy = runLarge()
		} else {
			y, cy = runLarge()
			x, cx = runSmall()
		}
		s, l, ratio = append(s, x), append(l, y), append(ratio, y/x)
		cs, cl = append(cs, cx), append(cl, cy)
	}
	b.ReportMetric(medianOf(s), fmt.Sprintf("engine-µs/stage-K%d", small))
	b.ReportMetric(medianOf(l), fmt.Sprintf("engine-µs/stage-K%d", large))
	b.ReportMetric(medianOf(ratio), fmt.Sprintf("K%d/K%d", large, small))
	b.ReportMetric(medianOf(cs), fmt.Sprintf("cpu-µs/stage-K%d", small))
	b.ReportMetric(medianOf(cl), fmt.Sprintf("cpu-µs/stage-K%d", large))
}

// BenchmarkDurableFn: linear workflows of fn stages on SQLite, 10 and
// 1,000 long: the engine's bookkeeping per stage is its share of the run
// record's writes (quick fn stages share one every 5 ms, see recordAfter;
// a run also pays its creation and its end). The target is under 50 µs
// a stage, flat (K1000/K10 at most about 1).
func BenchmarkDurableFn(b *testing.B) {
	benchDurable(b, "fn", 10, 1000, func(*sessions.Store) Executor { return fnStages{} })
}

// BenchmarkDurableAgent: linear workflows of agent stages (the mock
// provider, one reply a stage) on SQLite, 10 and 100 long: the engine's
// bookkeeping per stage is the stage session's events and the run
// record.
func BenchmarkDurableAgent(b *testing.B) {
	benchDurable(b, "agent", 10, 100, func(store *sessions.Store) Executor {
		return &agentStages{store: store, provider: mock.New().Wrap("mock", nil, nil)}
	})
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
