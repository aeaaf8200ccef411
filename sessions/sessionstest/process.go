package sessionstest

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
	"github.com/skein-dev/skein/sessions/message"
)

// The multi-process tests run the backend's test binary again as helper
// processes that share the test's storage; these variables tell a helper
// what to do.
const (
	helperMode   = "SKEIN_SESSIONSTEST_HELPER" // "once", "retry" or "open"
	helperTarget = "SKEIN_SESSIONSTEST_TARGET" // the storage, as open takes it
	helperTag    = "SKEIN_SESSIONSTEST_TAG"
	helperGo     = "SKEIN_SESSIONSTEST_GO" // once, open: act when this file exists
	helperN      = "SKEIN_SESSIONSTEST_N"  // retry: turns; open: rounds
)

// ProcessHelper makes this process a helper of RunProcessTests, if its
// environment says it is one: it does its part and exits. A backend's
// TestMain calls it first, with the function that opens its storage:
//
//	func TestMain(m *testing.M) {
//		sessionstest.ProcessHelper(func(target string) (sessions.Backend, error) { return Open(target) })
//		os.Exit(m.Run())
//	}
func ProcessHelper(open func(target string) (sessions.Backend, error)) {
	mode := os.Getenv(helperMode)
	if mode == "" {
		return
	}
	if err := helper(mode, open); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunProcessTests runs the tests in which several processes share one
// storage: newTarget returns a new, empty one (a file path, a database
// URL), which open opens in every process. The backend's TestMain must
// call ProcessHelper with the same open.
//
//   - OneWinner: processes write one session at the same version at once;
//     exactly one write lands, the others get ErrConflict.
//   - Retry: processes append turns to one session, reloading on
//     conflict; every turn lands whole and the transcript is valid.
//   - OpenNewID: processes open one new id through their Stores at once,
//     many rounds; every open succeeds and exactly one creates.
func RunProcessTests(t *testing.T, newTarget func(t *testing.T) string, open func(target string) (sessions.Backend, error)) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, target string, open func(string) (sessions.Backend, error))
	}{
		{"OneWinner", testProcessesOneWinner},
		{"Retry", testProcessesRetry},
		{"OpenNewID", testProcessesOpenNewID},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newTarget(t), open) })
	}
}

// processTurn is one agent turn on rec: a tool call and its result, which
// a write interleaved with another would separate.
func processTurn(rec *sessions.Record, tag string) *sessions.Change {
	seq := int64(len(rec.Events)) + 1
	return &sessions.Change{
		Append: []message.Message{
			{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: tag, Name: "work", Arguments: map[string]any{}}}},
			{Role: message.RoleTool, ToolCallID: tag, Name: "work", Text: tag},
		},
		Events:   []sessions.Event{{Seq: seq, Type: "turn_end", SessionID: rec.ID, Time: time.Now(), CorrID: tag}},
		AddTurns: 1,
	}
}

// waitFor returns once path exists.
func waitFor(path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// helper is the body of a helper process. It reports on stdout: "ready"
// once it has loaded the session (modes once and open), then "ok" or
// "conflict" (once), the number of conflicts it retried (retry), or
// "created" or "resumed" per round (open).
func helper(mode string, open func(string) (sessions.Backend, error)) error {
	b, err := open(os.Getenv(helperTarget))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, tag := context.Background(), os.Getenv(helperTag)
	n, _ := strconv.Atoi(os.Getenv(helperN))
	switch mode {
	case "once":
		rec, err := b.Load(ctx, "s")
		if err != nil {
			return err
		}
		fmt.Println("ready")
		waitFor(os.Getenv(helperGo))
		err = b.Write(ctx, "s", rec.Version, processTurn(rec, tag))
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.Is(err, sessions.ErrConflict):
			fmt.Println("conflict")
		default:
			return err
		}
	case "retry":
		conflicts := 0
		for done := 0; done < n; {
			rec, err := b.Load(ctx, "s")
			if err != nil {
				return err
			}
			err = b.Write(ctx, "s", rec.Version, processTurn(rec, fmt.Sprintf("%s-%d", tag, done)))
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
	case "open":
		st, err := sessions.NewStore(b)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		for round := range n {
			waitFor(fmt.Sprintf("%s.%d", os.Getenv(helperGo), round))
			o, err := st.OpenWith(ctx, fmt.Sprint("new-", round), sessions.OpenOptions{})
			if err != nil {
				return err
			}
			fmt.Println(map[bool]string{true: "created", false: "resumed"}[o.Created])
		}
		return st.Shutdown()
	default:
		return fmt.Errorf("unknown mode '%s'", mode)
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

// openShared opens target in this process; the test's cleanup closes it.
func openShared(t *testing.T, target string, open func(string) (sessions.Backend, error)) sessions.Backend {
	t.Helper()
	b, err := open(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newSharedSession creates session "s" in target.
func newSharedSession(t *testing.T, target string, open func(string) (sessions.Backend, error)) sessions.Backend {
	b := openShared(t, target, open)
	now := time.Now()
	if err := b.Create(t.Context(), &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return b
}

// readyHelpers starts procs helpers in mode and waits until each says
// ready; env holds each one's extra variables.
func readyHelpers(t *testing.T, procs int, env func(i int) []string) []<-chan string {
	var outs []<-chan string
	for i := range procs {
		_, lines := helperProcess(t, env(i)...)
		select {
		case line := <-lines:
			if line != "ready" {
				t.Fatalf("helper %d: %q, want ready", i, line)
			}
		case <-time.After(time.Minute):
			t.Fatalf("helper %d: not ready after a minute", i)
		}
		outs = append(outs, lines)
	}
	return outs
}

func testProcessesOneWinner(t *testing.T, target string, open func(string) (sessions.Backend, error)) {
	const procs = 4
	b := newSharedSession(t, target, open)
	goFile := filepath.Join(t.TempDir(), "go")
	outs := readyHelpers(t, procs, func(i int) []string {
		return []string{helperMode + "=once", helperTarget + "=" + target, helperGo + "=" + goFile, fmt.Sprintf("%s=p%d", helperTag, i)}
	})
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, lines := range outs {
		results = append(results, <-lines)
	}
	all := strings.Join(results, " ")
	if strings.Count(all, "ok") != 1 || strings.Count(all, "conflict") != procs-1 {
		t.Fatalf("results %v, want one ok and %d conflicts", results, procs-1)
	}
	rec, err := b.Load(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != 1 || len(rec.Messages) != 2 || len(rec.Events) != 1 {
		t.Fatalf("after the race: version %d, %d messages, %d events; want 1, 2, 1", rec.Version, len(rec.Messages), len(rec.Events))
	}
}

func testProcessesRetry(t *testing.T, target string, open func(string) (sessions.Backend, error)) {
	const procs, turns = 3, 10
	b := newSharedSession(t, target, open)
	var cmds []*exec.Cmd
	var outs []<-chan string
	for i := range procs {
		cmd, lines := helperProcess(t, helperMode+"=retry", helperTarget+"="+target, fmt.Sprintf("%s=p%d", helperTag, i), fmt.Sprintf("%s=%d", helperN, turns))
		cmds, outs = append(cmds, cmd), append(outs, lines)
	}
	ctx := t.Context()
	for done := 0; done < turns; {
		rec, err := b.Load(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Write(ctx, "s", rec.Version, processTurn(rec, fmt.Sprintf("main-%d", done))); err == nil {
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
	if err := message.Validate(rec.Messages); err != nil {
		t.Fatalf("transcript written by %d processes is not valid: %v", procs+1, err)
	}
}

func testProcessesOpenNewID(t *testing.T, target string, open func(string) (sessions.Backend, error)) {
	const procs, rounds = 4, 5
	b := openShared(t, target, open)
	goFile := filepath.Join(t.TempDir(), "go")
	outs := readyHelpers(t, procs, func(i int) []string {
		return []string{helperMode + "=open", helperTarget + "=" + target, helperGo + "=" + goFile, fmt.Sprintf("%s=%d", helperN, rounds)}
	})
	for round := range rounds {
		if err := os.WriteFile(fmt.Sprintf("%s.%d", goFile, round), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var results []string
		for i, lines := range outs {
			line, ok := <-lines
			if !ok {
				t.Fatalf("round %d: helper %d exited (see its stderr)", round, i)
			}
			results = append(results, line)
		}
		all := strings.Join(results, " ")
		if strings.Count(all, "created") != 1 || strings.Count(all, "resumed") != procs-1 {
			t.Fatalf("round %d: opens %v, want one created and %d resumed", round, results, procs-1)
		}
		rec, err := b.Load(t.Context(), fmt.Sprint("new-", round))
		if err != nil || rec.Status != sessions.StatusActive {
			t.Fatalf("round %d: Load = %+v, %v", round, rec, err)
		}
	}
}
