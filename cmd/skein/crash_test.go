package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// crashScript runs a long agent loop on session "crash" and prints a line
// for every message appended to it, from a subscriber: the loop delivers
// events once they are committed, so a printed message is acknowledged
// and must survive any crash. Two runs of its tool in three take 2 ms and
// the third microseconds, so the loop commits some replies before their
// tool runs (the tool was slow on its last run: n = 0 mod 3 and 1 mod 3)
// and others together with its result (it was quick: n = 2 mod 3, see
// agent.Config.QuickTool), and kills land in 2 ms runs of both kinds.
const crashScript = `
s = agent_session_open("crash", max_turns = 100000)

def report(e):
    if e["type"] == "message":
        print("appended", e["seq"], e["index"], e["role"])

agent_subscribe(s, report)

def work(n):
    """Does a little work.

    Args:
      n: the step.
    """
    if int(n) % 3 != 1:
        sleep(0.002)
    return "step %s done" % n

for i in range(300):
    llm_mock(tool_calls = [{"name": "work", "arguments": {"n": str(i)}}])
agent_loop("Work for a long time.", provider = "mock", session_id = s, tools = [work], max_iterations = 1000)
print("finished")
`

// reported is a message a child process reported appended.
type reported struct {
	seq, index int64
	role       string
}

// skeinBinary returns the skein command testscript installs in PATH for
// the tests of this package (see TestMain).
func skeinBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("skein")
	if err != nil {
		t.Fatalf("skein is not in PATH: %v", err)
	}
	return path
}

// TestCrashLosesNothing runs a long agent loop in a child process on a
// durable store (SQLite, and PostgreSQL when the test database is set)
// and kills it with SIGKILL at random points, many times
// (a fixed seed picks the points), at each durability level. After each
// kill the session reopens, is healed into a valid transcript that is a
// prefix of what the loops did (checkLoopPrefix) and extends what the
// last kill left, and holds every message the child had reported
// appended. Each run resumes the session the last one left.
func TestCrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills many processes")
	}
	forEachDurableStore(t, func(t *testing.T, newStore func(*testing.T) durableStore) {
		for _, d := range sessions.Durabilities {
			t.Run(string(d), func(t *testing.T) { crashLoop(t, d, newStore(t)) })
		}
	})
}

func crashLoop(t *testing.T, durability sessions.Durability, store durableStore) {
	const runs = 20
	bin := skeinBinary(t)
	dir := t.TempDir()
	db := store.target
	script := filepath.Join(dir, "crash.star")
	if err := os.WriteFile(script, []byte(crashScript), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 2026))
	var all []reported // every message reported by any run
	var stored []message.Message
	healed := 0
	for run := range runs {
		// Kill after a random number of reported messages, plus up to
		// 3 ms, so kills land in writes, in tools and between them.
		after, extra := 1+rng.IntN(60), time.Duration(rng.IntN(3000))*time.Microsecond
		got, finished := crashRun(t, bin, db, script, durability, after, extra)
		all = append(all, got...)

		// Reopen as the next process would: the store heals open calls.
		b, err := store.open()
		if err != nil {
			t.Fatal(err)
		}
		store, err := sessions.NewStore(b)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := store.Open(ctx, "crash", 0); err != nil {
			t.Fatalf("run %d: reopening: %v", run, err)
		}
		rec, err := store.Snapshot(ctx, "crash")
		if err != nil {
			t.Fatal(err)
		}
		if err := message.Validate(rec.Messages); err != nil {
			t.Fatalf("run %d (killed after %d messages + %s): the healed transcript is not valid: %v", run, after, extra, err)
		}
		if err := checkLoopPrefix(rec.Messages); err != nil {
			t.Fatalf("run %d (killed after %d messages + %s): the transcript is not a prefix of what the loops did: %v", run, after, extra, err)
		}
		if len(rec.Messages) < len(stored) {
			t.Fatalf("run %d: %d messages stored, fewer than the %d before it", run, len(rec.Messages), len(stored))
		}
		for i := range stored {
			if a, b := rec.Messages[i], stored[i]; a.Role != b.Role || a.Text != b.Text || a.ToolCallID != b.ToolCallID {
				t.Fatalf("run %d: message %d changed: %+v, was %+v", run, i, a, b)
			}
		}
		stored = rec.Messages
		events := map[int64]*sessions.Event{}
		for i := range rec.Events {
			events[rec.Events[i].Seq] = &rec.Events[i]
			if rec.Events[i].Type == sessions.EventHealed {
				healed++
			}
		}
		for _, r := range all {
			if r.index >= int64(len(rec.Messages)) || rec.Messages[r.index].Role != r.role {
				t.Fatalf("run %d: message %d (%s), reported appended, is not in the session (%d messages)", run, r.index, r.role, len(rec.Messages))
			}
			e := events[r.seq]
			if e == nil || e.Type != sessions.EventMessage || e.Data["index"] != r.index {
				t.Fatalf("run %d: the message event %d of message %d is not in the log: %+v", run, r.seq, r.index, e)
			}
		}
		if err := store.Shutdown(); err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: killed after %d messages + %s (finished: %v): %d messages, %d events", run, len(got), extra, finished, len(rec.Messages), len(rec.Events))
	}
	if healed == 0 {
		t.Errorf("no kill left a tool call open in %d runs: the test does not exercise healing", runs)
	}
}

// checkLoopPrefix checks that msgs are what runs of crashScript append,
// each cut short anywhere: per run the prompt, then calls of work with n
// = 0, 1, 2, ... each followed by its result ("step n done"), until a
// text reply, or until a result healed as "interrupted" (the run was
// killed before the result was stored), after which the next run's
// prompt follows. No call is left open: the store heals on open.
func checkLoopPrefix(msgs []message.Message) error {
	const prompt = "Work for a long time."
	next := -1 // n of the next call; -1 while a prompt must come next
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		switch {
		case m.Role == message.RoleUser && m.Text == prompt:
			next = 0
		case m.Role == message.RoleAssistant && next >= 0 && len(m.ToolCalls) == 0:
			next = -1 // the run's loop finished
		case m.Role == message.RoleAssistant && next >= 0:
			c := m.ToolCalls[0]
			if len(m.ToolCalls) != 1 || c.Name != "work" || fmt.Sprint(c.Arguments["n"]) != fmt.Sprint(next) {
				return fmt.Errorf("message %d: calls %+v, want one call of work with n = %d", i, m.ToolCalls, next)
			}
			if i+1 == len(msgs) {
				return fmt.Errorf("message %d: the last message is a call without its result", i)
			}
			i++
			r := &msgs[i]
			switch {
			case r.Role != message.RoleTool || r.ToolCallID != c.ID:
				return fmt.Errorf("message %d: %s message for call %q, want the result of call %q", i, r.Role, r.ToolCallID, c.ID)
			case r.IsError && r.Text == "interrupted":
				next = -1
			case r.IsError || r.Text != fmt.Sprintf("step %d done", next):
				return fmt.Errorf("message %d: result %q (error %v), want \"step %d done\"", i, r.Text, r.IsError, next)
			default:
				next++
			}
		default:
			return fmt.Errorf("message %d: unexpected %s message %q (expecting the call n = %d)", i, m.Role, m.Text, next)
		}
	}
	return nil
}

// crashRun runs the script in a child process at the given durability
// and kills it with SIGKILL once it has reported after messages, and
// extra later. It returns the messages the child reported and whether it
// finished first.
func crashRun(t *testing.T, bin, db, script string, durability sessions.Durability, after int, extra time.Duration) ([]reported, bool) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--store", db, script)
	cmd.Env = append(os.Environ(), "SKEIN_STORE=", "SKEIN_DURABILITY="+string(durability))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []reported
	finished := false
	sc := bufio.NewScanner(out)
	killed := make(chan struct{})
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 4 && fields[0] == "appended":
			seq, err1 := strconv.ParseInt(fields[1], 10, 64)
			index, err2 := strconv.ParseInt(fields[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", sc.Text())
			}
			got = append(got, reported{seq, index, fields[3]})
		case len(fields) > 0 && fields[0] == "finished":
			finished = true
		}
		if len(got) == after {
			go func() {
				time.Sleep(extra)
				cmd.Process.Kill() // SIGKILL
				close(killed)
			}()
		}
	}
	err = cmd.Wait()
	if len(got) >= after {
		<-killed
	}
	if err != nil && !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child failed: %v\n%s", err, stderr.String())
	}
	if err == nil && !finished {
		t.Fatalf("the child exited without finishing:\n%s", stderr.String())
	}
	return got, finished
}
