package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workflow"
)

// crashStages is the number of stages of the crash test's workflow: a
// line of fn and agent stages, alternating.
const crashStages = 16

// crashFlow writes the crash test's workflow: fn stages log "ATTEMPT
// start NODE" and "ATTEMPT end NODE" around a short sleep (so kills land
// inside them), and while the file hold.txt exists they wait after
// their start (so that a kill lands inside one however slow the
// machine); agent stages call a slow tool once.
func crashFlow(t *testing.T, dir string) string {
	var b strings.Builder
	b.WriteString("name: crash\nentry: s00\nnodes:\n")
	for i := 0; i < crashStages; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "  s%02d:\n    mode: fn\n    fn: lib.star:stage\n", i)
		} else {
			fmt.Fprintf(&b, "  s%02d:\n    mode: agent\n    prompt: \"stage %d after {output}\"\n", i, i)
		}
	}
	b.WriteString("edges:\n")
	for i := 1; i < crashStages; i++ {
		fmt.Fprintf(&b, "  - from: s%02d\n    to: s%02d\n", i-1, i)
	}
	lib := `
def stage(ctx):
    attempt = fs.read("attempt.txt").strip()
    fs.append("log.txt", "%s start %s\n" % (attempt, ctx["node"]))
    for _ in range(6000):  # held while the test holds it, to be killed inside
        if not fs.exists("hold.txt"):
            break
        sleep(0.01)
    sleep(0.06)
    fs.append("log.txt", "%s end %s\n" % (attempt, ctx["node"]))
    return "out of " + ctx["node"]
`
	for name, data := range map[string]string{"flow.yaml": b.String(), "lib.star": lib} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "flow.yaml")
}

// TestWorkflowCrash runs a workflow file in a child process and kills it
// with SIGKILL at random points (a fixed seed picks them), between and
// inside stages, then resumes it with the same run id until it
// completes, on SQLite and on PostgreSQL (when the test database is
// set). After every kill the run record lists each stage it
// completed once, in order, and every stage session is valid; a stage
// recorded completed is never started again by a later process; the
// final run completes with every stage exactly once.
func TestWorkflowCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills many processes")
	}
	forEachDurableStore(t, func(t *testing.T, newStore func(*testing.T) durableStore) { workflowCrash(t, newStore(t)) })
}

func workflowCrash(t *testing.T, store durableStore) {
	bin := skeinBinary(t)
	dir := t.TempDir()
	flow := crashFlow(t, dir)
	db := store.target
	rng := rand.New(rand.NewPCG(14, 2026))
	var completed []string // nodes the record lists completed, in order
	kills, inside, between := 0, 0, 0
	for attempt := 1; ; attempt++ {
		if attempt > 40 {
			t.Fatal("the run did not complete in 40 attempts")
		}
		if err := os.WriteFile(filepath.Join(dir, "attempt.txt"), []byte(fmt.Sprint(attempt)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--store", db, "--provider", "mock", flow, "--task", "crash me", "--run-id", "r")
		cmd.Dir = dir
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		killed := false
		// Every third attempt that kills holds its first fn stage open
		// (hold.txt) and is killed once the stage started: a kill inside
		// a stage on every machine. The others are killed a random time
		// after their first fn stage started, in stages and between them.
		hold := filepath.Join(dir, "hold.txt")
		held := attempt < 25 && attempt%3 == 1
		if held {
			if err := os.WriteFile(hold, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if attempt < 25 {
			started := time.NewTicker(5 * time.Millisecond)
			var kill <-chan time.Time
		wait:
			for {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("attempt %d: %v\n%s", attempt, err, out.String())
					}
					break wait
				case <-started.C:
					if log, _ := os.ReadFile(filepath.Join(dir, "log.txt")); kill == nil && strings.Contains(string(log), fmt.Sprintf("%d start", attempt)) {
						delay := time.Duration(rng.IntN(120)) * time.Millisecond
						if held {
							delay = 0
						}
						kill = time.After(delay)
					}
				case <-kill:
					cmd.Process.Kill()
					<-done
					killed = true
					kills++
					break wait
				}
			}
			started.Stop()
			if err := os.Remove(hold); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		} else if err := <-done; err != nil {
			t.Fatalf("attempt %d: %v\n%s", attempt, err, out.String())
		}
		run := loadCrashRun(t, store)
		var now []string
		for _, s := range run.Steps {
			if !s.Completed() {
				t.Fatalf("attempt %d: step %+v did not complete, yet is recorded", attempt, s)
			}
			now = append(now, s.Node)
		}
		for i, n := range now {
			if want := fmt.Sprintf("s%02d", i); n != want {
				t.Fatalf("attempt %d: recorded steps %v, want each stage once in order", attempt, now)
			}
		}
		if len(now) < len(completed) {
			t.Fatalf("attempt %d: %d steps recorded, fewer than the %d before", attempt, len(now), len(completed))
		}
		// no process started a stage the record had completed before it
		log, _ := os.ReadFile(filepath.Join(dir, "log.txt"))
		starts, ends := map[string]int{}, map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
			var a int
			var what, node string
			if _, err := fmt.Sscanf(line, "%d %s %s", &a, &what, &node); err != nil {
				continue
			}
			if a == attempt && what == "start" {
				starts[node]++
			}
			if a == attempt && what == "end" {
				ends[node]++
			}
		}
		for _, n := range completed {
			if starts[n] > 0 {
				t.Fatalf("attempt %d started %s, which an earlier attempt completed", attempt, n)
			}
		}
		open := false
		for n, c := range starts {
			if c != 1 {
				t.Fatalf("attempt %d started %s %d times", attempt, n, c)
			}
			open = open || ends[n] == 0
		}
		if held && killed && !open {
			t.Fatalf("attempt %d held its fn stage, yet was killed outside it", attempt)
		}
		if killed && open {
			inside++
		} else if killed {
			between++
		}
		checkStageSessions(t, store, run)
		completed = now
		t.Logf("attempt %d (killed %v): %d stages recorded, status %s", attempt, killed, len(now), run.Status)
		if !killed {
			if run.Status != workflow.StatusCompleted || len(now) != crashStages || run.Output == "" || strings.TrimSpace(out.String()) != run.Output {
				t.Fatalf("the last attempt: status %s, %d stages, output %q", run.Status, len(now), out.String())
			}
			break
		}
	}
	if inside == 0 {
		t.Errorf("%d kills, none inside an fn stage: the test does not exercise crashes inside stages", kills)
	}
	t.Logf("%d kills: %d inside an fn stage, %d elsewhere (in agent stages, between stages)", kills, inside, between)
}

func loadCrashRun(t *testing.T, store durableStore) *workflow.Run {
	t.Helper()
	b, err := store.open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run, err := workflow.Load(context.Background(), b.(sessions.RunBackend), "r")
	if errors.Is(err, sessions.ErrRunNotFound) {
		return &workflow.Run{Status: workflow.StatusRunning} // killed before the run started
	}
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// checkStageSessions reopens every agent stage session of the run (which
// heals it) and validates its transcript.
func checkStageSessions(t *testing.T, db durableStore, run *workflow.Run) {
	t.Helper()
	b, err := db.open()
	if err != nil {
		t.Fatal(err)
	}
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Shutdown()
	ctx := context.Background()
	for i := 1; i < crashStages; i += 2 {
		id := fmt.Sprintf("r/s%02d", i)
		if ok, _ := store.Exists(ctx, id); !ok {
			continue
		}
		if _, err := store.Open(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		rec, err := store.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := message.Validate(rec.Messages); err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
	}
}
