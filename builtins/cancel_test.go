package builtins_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// TestCancelledLoopLeavesAHealedResumableSession cancels the run while a
// tool blocks; the session keeps the assistant's tool call, gets an error
// result "cancelled" for it, and a later loop on it works.
func TestCancelledLoopLeavesAHealedResumableSession(t *testing.T) {
	for _, blocker := range []string{"sleep(30)", "while True:\n        pass"} {
		t.Run(strings.Fields(blocker)[0], func(t *testing.T) {
			// The run is cancelled once the tool has started (it prints
			// "blocking"), however slow the machine; a minute is the
			// backstop of a tool that never starts.
			ctx, stop := context.WithTimeoutCause(context.Background(), time.Minute, errors.New("the tool did not start within a minute"))
			defer stop()
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			out := &cancelOnWrite{text: "blocking", cancel: func() { cancel(errors.New("test: cancelled while the tool blocks")) }}
			st, err := builtins.NewTestState(vm.Options{Stdout: out}, 1)
			if err != nil {
				t.Fatal(err)
			}
			end := st.Begin(ctx)
			_, err = st.ExecFile("cancel.star", `
def slow():
    print("blocking")
    `+blocker+`
    return "never"

llm_mock(tool_calls = [{"name": "slow"}, {"name": "slow"}])
agent_loop("go", session_id = "s", tools = [slow])
`)
			end()
			if err == nil || !strings.Contains(err.Error(), "test: cancelled while the tool blocks") {
				t.Fatalf("err = %v", err)
			}
			rec, err := st.Store.Snapshot(context.Background(), "s")
			if err != nil {
				t.Fatal(err)
			}
			if err := message.Validate(rec.Messages); err != nil {
				t.Fatalf("session is not valid after cancellation: %v", err)
			}
			roles := []string{}
			for _, m := range rec.Messages {
				roles = append(roles, m.Role+":"+m.Text)
			}
			if got := strings.Join(roles, " "); got != "user:go assistant: tool:cancelled tool:cancelled" {
				t.Fatalf("messages = %s", got)
			}
			if rec.Status != sessions.StatusCancelled {
				t.Fatalf("status = %s", rec.Status)
			}
			last, done := rec.Events[len(rec.Events)-2], rec.Events[len(rec.Events)-1]
			if last.Type != "cancelled" || last.Data["reason"] != "test: cancelled while the tool blocks" {
				t.Fatalf("last event but one = %+v", last)
			}
			if done.Type != "session:turn_completed" || done.Data["stopReason"] != "cancelled" {
				t.Fatalf("last event = %+v", done)
			}
			// resumable: a new run on the same VM continues the session
			end = st.Begin(context.Background())
			defer end()
			if _, err := st.ExecFile("resume.star", `
r = agent_loop("again", session_id = "s")
if r["status"] != "done":
    fail(r)
`); err != nil {
				t.Fatal(vm.FormatError(err))
			}
			if n, _ := st.Store.Length(context.Background(), "s"); n != 6 {
				t.Fatalf("length after resume = %d", n)
			}
		})
	}
}

// TestLoopTimeoutIsAStatus: timeout_s ends the loop with status timeout,
// not an error, and heals the open call.
func TestLoopTimeoutIsAStatus(t *testing.T) {
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard}, 1)
	if err != nil {
		t.Fatal(err)
	}
	end := st.Begin(context.Background())
	defer end()
	_, err = st.ExecFile("timeout.star", `
def slow():
    sleep(30)
    return "never"

llm_mock(tool_calls = [{"name": "slow"}])
r = agent_loop("go", session_id = "s", tools = [slow], timeout_s = 0.1)
if r["status"] != "timeout":
    fail(r)
msgs = agent_session_snapshot("s")["messages"]
if msgs[-1]["content"] != "cancelled" or not msgs[-1]["is_error"]:
    fail(msgs)
`)
	if err != nil {
		t.Fatal(vm.FormatError(err))
	}
}

// cancelOnWrite is an output that calls cancel once something written to
// it contains text.
type cancelOnWrite struct {
	text   string
	cancel func()
	mu     sync.Mutex
	seen   strings.Builder
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen.Write(p)
	if strings.Contains(w.seen.String(), w.text) {
		w.cancel()
	}
	return len(p), nil
}
