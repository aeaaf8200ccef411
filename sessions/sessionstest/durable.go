package sessionstest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

func testDurableFlag(t *testing.T, open opener) {
	h, _ := open()
	if !h.b.Durable() {
		t.Fatalf("Durable() = false for a backend under the durable tests")
	}
}

// family builds sessions that use every stored feature: messages of every
// kind, events, summary, statuses, turns, forks at several points and the
// trims and resets that move a shared prefix. It returns their expected
// records.
func family(h *harness) []*sessions.Record {
	summary := "summary ✓"
	rec := newRecord("root", at(0))
	rec.Messages = richMessages()
	rec.Events = stamp(rec, at(0), richEvents()...)
	rec.MaxTurns = 20
	root := h.create(rec)
	h.write(root, &sessions.Change{Append: users("r", 4), AddTurns: 2, SetSummary: true, Summary: &summary, UpdatedAt: at(1)})
	full := h.fork(root, "full", len(root.Messages), at(2))
	part := h.fork(root, "part", 5, at(3))
	h.write(root, &sessions.Change{DropFirst: 6, Events: stamp(root, at(4), sessions.Event{Type: sessions.EventTrim})})
	h.write(part, &sessions.Change{Append: users("p", 3), Status: sessions.StatusCompleted})
	grand := h.fork(part, "grand", 7, at(5))
	h.write(part, &sessions.Change{Replace: true, ReplaceWith: users("compacted", 1)})
	h.write(full, &sessions.Change{DropFirst: 2, Status: sessions.StatusError, MaxTurns: 3})
	other := h.create(newRecord("other", at(6)))
	return []*sessions.Record{root, full, part, grand, other}
}

// testRenamedEventTypes checks that a log written under the event types'
// old names (session_started, feedback_injected, compaction, reset) reads
// under their new names (sessions.EventType), from Load, LoadEvents and
// EventsAfter alike, after a reopen as in the same handle.
func testRenamedEventTypes(t *testing.T, open opener) {
	h, closeFn := open()
	want := h.create(newRecord("old", at(0)))
	old := []string{"session_started", "feedback_injected", "compaction", "reset", "turn_start"}
	events := make([]sessions.Event, len(old))
	for i, typ := range old {
		events[i] = sessions.Event{Type: typ, Data: map[string]any{"n": int64(i)}}
	}
	events = stamp(want, at(1), events...)
	if err := h.b.Write(h.ctx(), want.ID, want.Version, &sessions.Change{Events: events}); err != nil {
		t.Fatal(err)
	}
	closeFn()
	h, _ = open()
	wantTypes := "session:started agent:directive_injected agent:context_compacted agent:context_cleared turn_start"
	types := func(from string, events []sessions.Event, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		var got []string
		for _, e := range events {
			got = append(got, e.Type)
		}
		if strings.Join(got, " ") != wantTypes {
			t.Fatalf("%s: types %q, want %q", from, got, wantTypes)
		}
	}
	rec, err := h.b.Load(h.ctx(), "old")
	if err != nil {
		t.Fatal(err)
	}
	types("Load", rec.Events, nil)
	if p, ok := h.b.(sessions.PartialLoader); ok {
		evs, err := p.LoadEvents(h.ctx(), "old")
		types("LoadEvents", evs, err)
	}
	if f, ok := h.b.(sessions.EventReader); ok {
		evs, err := f.EventsAfter(h.ctx(), "old", 0, 0)
		types("EventsAfter", evs, err)
	}
}

func testReopen(t *testing.T, open opener) {
	h, closeFn := open()
	wants := family(h)
	closeFn()

	h, closeFn = open()
	for _, w := range wants {
		h.check(w)
	}
	h.checkList(wants, sessions.ListFilter{})
	// Versions survive: a stale write conflicts, a current one lands.
	root, grand := wants[0], wants[3]
	err := h.b.Write(h.ctx(), root.ID, root.Version-1, &sessions.Change{Append: users("stale", 1)})
	h.wantErr("stale Write after reopen", err, sessions.ErrConflict, root.ID)
	h.write(root, &sessions.Change{Append: users("after", 2)})
	wants = append(wants, h.fork(grand, "late", 3, at(7)))
	h.write(grand, &sessions.Change{DropFirst: 4})
	closeFn()

	h, _ = open()
	for _, w := range wants {
		h.check(w)
	}
	h.checkList(wants, sessions.ListFilter{})
}

// testTwoHandles checks two backends open on the same storage at once:
// each sees the other's writes, and a write at a version the other handle
// replaced conflicts.
func testTwoHandles(t *testing.T, open opener) {
	a, _ := open()
	b, _ := open()
	wants := family(a)
	for _, w := range wants {
		b.check(w)
	}
	root := wants[0]
	b.write(root, &sessions.Change{Append: users("from b", 1)})
	a.check(root)
	c := a.fork(root, "c", 2, at(8))
	b.check(root)
	b.check(c)

	stale := root.Version
	a.write(root, &sessions.Change{Append: users("from a", 1)})
	err := b.b.Write(b.ctx(), root.ID, stale, &sessions.Change{Append: users("lost", 1)})
	b.wantErr("Write at a version the other handle replaced", err, sessions.ErrConflict, root.ID)
	b.check(root)

	if err := b.b.Delete(b.ctx(), "c", false); err != nil {
		t.Fatalf("Delete(c) through the second handle: %v", err)
	}
	_, err = a.b.Load(a.ctx(), "c")
	a.wantErr("Load of a session the other handle deleted", err, sessions.ErrNotFound, "c")
}

// testTwoHandlesRace races writers spread over two handles on one session.
func testTwoHandlesRace(t *testing.T, open opener) {
	a, _ := open()
	b, _ := open()
	handles := []*harness{a, b}
	want := a.create(newRecord("s", at(0)))
	changes := make([]*sessions.Change, writers)
	for round := range 4 {
		base := want.Version
		for i := range changes {
			changes[i] = turnChange(want, fmt.Sprintf("r%dw%d", round, i))
		}
		errs := race(func(i int) error {
			h := handles[i%2]
			return h.b.Write(h.ctx(), "s", base, changes[i])
		})
		w := a.oneWinner(fmt.Sprintf("round %d over two handles", round), errs, sessions.ErrConflict)
		apply(want, changes[w])
		a.check(want)
		b.check(want)
	}
	got, err := b.b.Load(b.ctx(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := message.Validate(got.Messages); err != nil {
		t.Fatalf("transcript after the race is not valid: %v", err)
	}
}
