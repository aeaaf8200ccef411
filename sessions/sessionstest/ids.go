package sessionstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// idSession writes, through a Store over h's backend, the session "ids"
// and its fork "ids-fork": appends (a tool call with its result among
// them), a fork of everything, appends on both sides after it, and a
// compaction of the source that keeps its last two messages. It returns
// what the backend then holds.
func idSession(h *harness) (src, fork *sessions.Record) {
	h.t.Helper()
	n := 0
	clock := func() time.Time { n++; return at(n) }
	st, err := sessions.NewStore(h.b, sessions.WithClock(clock)) // the default id source
	if err != nil {
		h.t.Fatal(err)
	}
	ctx := h.ctx()
	must := func(what string, err error) {
		h.t.Helper()
		if err != nil {
			h.t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = st.Open(ctx, "ids", 0)
	must("Open", err)
	_, err = st.Apply(ctx, "ids", &sessions.Change{Append: users("q", 2)})
	must("Apply", err)
	_, err = st.Apply(ctx, "ids", &sessions.Change{Append: []message.Message{
		{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "t", Arguments: map[string]any{}}}},
		{Role: message.RoleTool, ToolCallID: "c1", Text: "result"},
		{Role: message.RoleAssistant, Text: "done"}}})
	must("Apply", err)
	_, err = st.Fork(ctx, "ids", "ids-fork", sessions.ForkOptions{KeepFirst: -1})
	must("Fork", err)
	_, err = st.Apply(ctx, "ids-fork", &sessions.Change{Append: users("f", 1)})
	must("Apply to the fork", err)
	_, err = st.Apply(ctx, "ids", &sessions.Change{Append: users("s", 1)})
	must("Apply to the source", err)
	_, err = st.Update(ctx, "ids", func(v message.View) (*sessions.Change, error) {
		kept := []message.Message{{Role: message.RoleUser, Text: "[summary]"}, *v.At(v.Len() - 2), *v.At(v.Len() - 1)}
		return &sessions.Change{Replace: true, ReplaceWith: kept}, nil
	})
	must("compaction", err)
	load := func(id string) *sessions.Record {
		rec, err := h.b.Load(ctx, id)
		must("Load", err)
		return rec
	}
	return load("ids"), load("ids-fork")
}

// testMessageIDs checks the ids and times of stored messages: every
// message the store appended has a UUIDv7 id and its write's time, unique
// in its session; a fork shares its source's ids (and times) for the
// messages it shares and has new ones after; a compaction keeps the ids
// of the messages it keeps; a second load gives the same.
func testMessageIDs(h *harness) {
	src, fork := idSession(h)
	checkIDs(h.t, src)
	checkIDs(h.t, fork)
	if len(fork.Messages) != 6 || len(src.Messages) != 3 {
		h.t.Fatalf("%d messages in the fork, %d in the source; want 6 and 3", len(fork.Messages), len(src.Messages))
	}
	// The fork took the 5 messages of the source; then each appended one.
	// The compaction kept the source's last two: its 5th and its own 6th.
	if src.Messages[1].ID != fork.Messages[4].ID || !src.Messages[1].CreatedAt.Equal(fork.Messages[4].CreatedAt) {
		h.t.Errorf("a message the fork shares: %q at %v in the source, %q at %v in the fork",
			src.Messages[1].ID, src.Messages[1].CreatedAt, fork.Messages[4].ID, fork.Messages[4].CreatedAt)
	}
	if src.Messages[2].ID == fork.Messages[5].ID {
		h.t.Errorf("messages appended after the fork share id %q", src.Messages[2].ID)
	}
	if !src.Messages[2].CreatedAt.After(src.Messages[1].CreatedAt) {
		h.t.Errorf("a later write's message is not later: %v, then %v", src.Messages[1].CreatedAt, src.Messages[2].CreatedAt)
	}
	again, err := h.b.Load(h.ctx(), "ids-fork")
	if err != nil {
		h.t.Fatal(err)
	}
	if d := diffMessages(again.Messages, fork.Messages); len(d) > 0 {
		h.t.Errorf("a second load differs: %v", d)
	}
}

// testMessageIDsReopen checks that ids and times survive reopening the
// storage.
func testMessageIDsReopen(t *testing.T, open opener) {
	h, closeFn := open()
	src, fork := idSession(h)
	closeFn()
	h, _ = open()
	for _, want := range []*sessions.Record{src, fork} {
		got, err := h.b.Load(h.ctx(), want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffMessages(got.Messages, want.Messages); len(d) > 0 {
			t.Errorf("%s after reopening: %v", want.ID, d)
		}
	}
}

// checkIDs checks that every message of rec has a UUIDv7 id, unique in
// rec, and a time.
func checkIDs(t *testing.T, rec *sessions.Record) {
	t.Helper()
	seen := map[string]int{}
	for i, m := range rec.Messages {
		id, err := uuid.Parse(m.ID)
		if err != nil || id.Version() != 7 {
			t.Errorf("%s: message %d has id %q, want a UUIDv7 (%v)", rec.ID, i, m.ID, err)
		}
		if j, dup := seen[m.ID]; dup {
			t.Errorf("%s: messages %d and %d share id %q", rec.ID, j, i, m.ID)
		}
		seen[m.ID] = i
		if m.CreatedAt.IsZero() {
			t.Errorf("%s: message %d has no time", rec.ID, i)
		}
	}
	if t.Failed() {
		t.Logf("%s: %s", rec.ID, fmt.Sprint(rec.Messages))
	}
}
