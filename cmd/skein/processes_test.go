package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// raceScript opens session argv[0], says so, waits until session argv[1]
// exists (the test creates it once every process is ready, so all of
// them hold the same version of the session), then writes to it: one
// injected message, or a whole agent loop with tool calls.
const raceScript = `
id, go, mode = argv[0], argv[1], argv[2]
s = agent_session_open(id)
print("ready")
while not agent_session_exists(go):
    sleep(0.002)

def work():
    """Does some work."""
    return "worked"

if mode == "inject":
    agent_session_inject(s, {"role": "user", "content": "from " + argv[3]})
else:
    llm_mock(tool_calls = [{"name": "work", "arguments": {}}])
    llm_mock(tool_calls = [{"name": "work", "arguments": {}}])
    llm_mock(text = "done by " + argv[3])
    agent_loop("Work, " + argv[3] + ".", provider = "mock", session_id = s, tools = [work])
print("won")
`

// TestProcessesAppendToOneSession starts processes that each load the
// same session of a durable store (SQLite, and PostgreSQL when the test
// database is set) and then write to it at once, many rounds: in every round
// exactly one write lands, every other process fails with the
// "modified by another process" error and writes nothing more, and the
// transcript stays valid.
func TestProcessesAppendToOneSession(t *testing.T) {
	forEachDurableStore(t, func(t *testing.T, newStore func(*testing.T) durableStore) { processesAppend(t, newStore(t)) })
}

func processesAppend(t *testing.T, store durableStore) {
	bin := skeinBinary(t)
	dir := t.TempDir()
	db := store.target
	script := filepath.Join(dir, "race.star")
	if err := os.WriteFile(script, []byte(raceScript), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := store.open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		mode, procs := "inject", 2
		if round%2 == 1 {
			mode, procs = "loop", 3
		}
		id, goID := fmt.Sprint("shared-", round), fmt.Sprint("go-", round)
		now := time.Now()
		if err := b.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
			Messages: []message.Message{{Role: message.RoleSystem, Text: "shared"}}}); err != nil {
			t.Fatal(err)
		}
		type child struct {
			cmd    *exec.Cmd
			lines  chan string
			stderr *strings.Builder
		}
		var children []child
		for p := range procs {
			cmd := exec.Command(bin, "run", "--store", db, script, id, goID, mode, fmt.Sprint("p", p))
			c := child{cmd: cmd, lines: make(chan string, 4), stderr: &strings.Builder{}}
			cmd.Stderr = c.stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			go func() {
				defer close(c.lines)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					c.lines <- sc.Text()
				}
			}()
			children = append(children, c)
		}
		for p, c := range children {
			select {
			case line := <-c.lines:
				if line != "ready" {
					t.Fatalf("round %d, process %d: %q, want ready\n%s", round, p, line, c.stderr)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d, process %d: not ready", round, p)
			}
		}
		if err := b.Create(ctx, &sessions.Record{ID: goID, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		winners := 0
		for p, c := range children {
			var lines []string
			for line := range c.lines {
				lines = append(lines, line)
			}
			err := c.cmd.Wait()
			switch {
			case err == nil && strings.Join(lines, " ") == "won":
				winners++
			case err != nil && len(lines) == 0 && strings.Contains(c.stderr.String(),
				fmt.Sprintf("session '%s' was modified by another process (reopen it with agent_session_open to continue)", id)):
			default:
				t.Fatalf("round %d (%s), process %d: %v, stdout %q, stderr:\n%s", round, mode, p, err, lines, c.stderr)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d (%s): %d processes won, want exactly 1", round, mode, winners)
		}
		rec, err := b.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := message.Validate(rec.Messages); err != nil {
			t.Fatalf("round %d (%s): the transcript is not valid: %v", round, mode, err)
		}
		want := 2 // the system message and one injected message
		if mode == "loop" {
			want = 1 + 1 + 2*2 + 1 // system, prompt, two tool calls with results, the answer
		}
		if len(rec.Messages) != want || rec.Status != sessions.StatusActive {
			t.Fatalf("round %d (%s): %d messages, status %s; want %d, active (one writer's, whole)", round, mode, len(rec.Messages), rec.Status, want)
		}
		for _, e := range rec.Events {
			if e.Type == "error" || e.Type == sessions.EventHealed {
				t.Fatalf("round %d (%s): a loser wrote a %s event", round, mode, e.Type)
			}
		}
	}
}
