package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// The multi-process tests run this test binary again as helper processes
// that write to the same database; these variables tell it what to do.
const (
	helperMode = "SKEIN_SQLITE_HELPER" // "once" or "retry"
	helperDB   = "SKEIN_SQLITE_DB"
	helperTag  = "SKEIN_SQLITE_TAG"
	helperGo   = "SKEIN_SQLITE_GO" // once: write when this file exists
	helperN    = "SKEIN_SQLITE_N"  // retry: how many turns to write
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperMode); mode != "" {
		if err := helper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// turn is one agent turn on rec: a tool call and its result, which a write
// interleaved with another would separate.
func turn(rec *sessions.Record, tag string) *sessions.Change {
	seq := int64(len(rec.Events)) + 1
	return &sessions.Change{
		Append: []sessions.Message{
			{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: tag, Name: "work", Arguments: map[string]any{}}}},
			{Role: sessions.RoleTool, ToolCallID: tag, Name: "work", Text: tag},
		},
		Events:   []sessions.Event{{Seq: seq, Type: "turn_end", SessionID: rec.ID, Time: time.Now(), CorrID: tag}},
		AddTurns: 1,
	}
}

// helper is the body of a helper process. It reports on stdout: "ready"
// once it has loaded the session (mode once), then "ok" or "conflict"
// (once) or the number of conflicts it retried (retry).
func helper(mode string) error {
	b, err := Open(os.Getenv(helperDB))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, tag := context.Background(), os.Getenv(helperTag)
	switch mode {
	case "once":
		rec, err := b.Load(ctx, "s")
		if err != nil {
			return err
		}
		fmt.Println("ready")
		for {
			if _, err := os.Stat(os.Getenv(helperGo)); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		err = b.Write(ctx, "s", rec.Version, turn(rec, tag))
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.Is(err, sessions.ErrConflict):
			fmt.Println("conflict")
		default:
			return err
		}
	case "retry":
		n, err := strconv.Atoi(os.Getenv(helperN))
		if err != nil {
			return err
		}
		conflicts := 0
		for done := 0; done < n; {
			rec, err := b.Load(ctx, "s")
			if err != nil {
				return err
			}
			err = b.Write(ctx, "s", rec.Version, turn(rec, fmt.Sprintf("%s-%d", tag, done)))
			switch {
			case err == nil:
				done++
			case errors.Is(err, sessions.ErrConflict):
				conflicts++
			default:
				return err
			}
		}
		fmt.Println(conflicts)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// helperProcess starts a helper; its stdout lines arrive on the channel.
func helperProcess(t *testing.T, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, lines
}

// newSharedSession creates session "s" in a new database and returns the
// database's path.
func newSharedSession(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := openTest(t, path)
	defer b.Close()
	now := time.Now()
	if err := b.Create(t.Context(), &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProcessesOneWinner has several processes write the same session at
// the same version at once: exactly one write lands.
func TestProcessesOneWinner(t *testing.T) {
	const procs = 4
	path := newSharedSession(t)
	goFile := filepath.Join(t.TempDir(), "go")
	var outs []<-chan string
	for i := range procs {
		_, lines := helperProcess(t, helperMode+"=once", helperDB+"="+path, helperGo+"="+goFile, fmt.Sprintf("%s=p%d", helperTag, i))
		if line := <-lines; line != "ready" {
			t.Fatalf("helper %d: %q, want ready", i, line)
		}
		outs = append(outs, lines)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, lines := range outs {
		results = append(results, <-lines)
	}
	if strings.Count(strings.Join(results, " "), "ok") != 1 || strings.Count(strings.Join(results, " "), "conflict") != procs-1 {
		t.Fatalf("results %v, want one ok and %d conflicts", results, procs-1)
	}
	b := openClosed(t, path)
	rec, err := b.Load(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != 1 || len(rec.Messages) != 2 || len(rec.Events) != 1 {
		t.Fatalf("after the race: version %d, %d messages, %d events; want 1, 2, 1", rec.Version, len(rec.Messages), len(rec.Events))
	}
}

// TestProcessesRetry has several processes and this one append turns to
// the same session, reloading on conflict: every turn lands whole.
func TestProcessesRetry(t *testing.T) {
	const procs, turns = 3, 10
	path := newSharedSession(t)
	var cmds []*exec.Cmd
	var outs []<-chan string
	for i := range procs {
		cmd, lines := helperProcess(t, helperMode+"=retry", helperDB+"="+path, fmt.Sprintf("%s=p%d", helperTag, i), fmt.Sprintf("%s=%d", helperN, turns))
		cmds, outs = append(cmds, cmd), append(outs, lines)
	}
	b := openClosed(t, path)
	ctx := t.Context()
	for done := 0; done < turns; {
		rec, err := b.Load(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Write(ctx, "s", rec.Version, turn(rec, fmt.Sprintf("main-%d", done))); err == nil {
			done++
		} else if !errors.Is(err, sessions.ErrConflict) {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		conflicts := <-outs[i]
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
		t.Logf("helper %d retried %s conflicts", i, conflicts)
	}
	rec, err := b.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	total := (procs + 1) * turns
	if rec.Version != int64(total) || len(rec.Messages) != 2*total || rec.Turns != total {
		t.Fatalf("version %d, %d messages, %d turns; want %d, %d, %d", rec.Version, len(rec.Messages), rec.Turns, total, 2*total, total)
	}
	if err := sessions.Validate(rec.Messages); err != nil {
		t.Fatalf("transcript written by %d processes is not valid: %v", procs+1, err)
	}
}
