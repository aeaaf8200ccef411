package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// TestCancelMidStream cancels a run while a real provider client is in
// the middle of a streamed reply: the partial reply is discarded (its
// deltas reached the subscriber, but no assistant message is stored), the
// session stays valid, is marked cancelled, and the next loop works.
func TestCancelMidStream(t *testing.T) {
	fake := newFakeOpenAI(0)
	defer fake.Close()
	t.Setenv("OPENAI_BASE_URL", fake.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", fakeKey)
	// The run is cancelled as soon as the first streamed delta has reached
	// the subscriber (a condition, not a guess at how long that takes on
	// a loaded machine); the stalled reply then never finishes.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	out := &cancelOnDelta{cancel: func() { cancel(errors.New("timeout: test")) }}
	vf := vmFlags{sessionCap: 10, maxTurns: 50, provider: "openai"}
	st, closeVM, err := vf.newState(stdio{out: out, err: out}, vmConfig{root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM()
	end := st.Begin(ctx)
	start := time.Now()
	_, err = st.ExecFile("stall.star", `
s = agent_session_open("s")
agent_subscribe(s, lambda e: print("delta:", e["text"]) if e["type"] == "text_delta" else None)
agent_loop("tell me a story", session_id = s, model = "stall")
`)
	end()
	if err == nil || !strings.Contains(err.Error(), "agent_loop: cancelled: timeout: test") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("cancellation took %v", time.Since(start))
	}
	if !strings.Contains(out.String(), "delta: echo: tell") {
		t.Fatalf("no partial delta reached the subscriber: %q", out.String())
	}
	rec, err := st.Store.Snapshot(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Messages) != 1 || rec.Messages[0].Text != "tell me a story" || rec.Status != sessions.StatusCancelled {
		t.Fatalf("after cancellation: status %s, messages %+v", rec.Status, rec.Messages)
	}
	if err := message.Validate(rec.Messages); err != nil {
		t.Fatal(err)
	}
	end = st.Begin(context.Background())
	defer end()
	if _, err := st.ExecFile("resume.star", `
r = agent_loop("again", session_id = "s", model = "gpt-4o-mini")
if r["visible_text"] != "echo: again":
    fail(r)
`); err != nil {
		t.Fatal(vm.FormatError(err))
	}
}

// cancelOnDelta collects a run's output and calls cancel once a streamed
// delta has been printed by the subscriber.
type cancelOnDelta struct {
	bytes.Buffer
	cancel func()
	once   sync.Once
}

func (w *cancelOnDelta) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.Buffer.String(), "delta: ") {
		w.once.Do(w.cancel)
	}
	return n, err
}
