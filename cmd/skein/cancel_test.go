package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
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
	var out bytes.Buffer
	vf := vmFlags{sessionCap: 10, maxTurns: 50, provider: "openai"}
	st, closeVM, err := vf.newState(stdio{out: &out, err: &out}, vmConfig{root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM()
	ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errors.New("timeout: test"))
	defer cancel()
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
	if time.Since(start) > 5*time.Second {
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
	if err := sessions.Validate(rec.Messages); err != nil {
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
