package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// TestStore drives a sessions.Store over this backend as a VM would:
// sessions survive eviction from the LRU and a new store on the reopened
// file, with forks and trims intact.
func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".skein", "sessions.db")
	ctx := t.Context()
	clock := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	newStore := func() *sessions.Store {
		s, err := sessions.NewStore(openTest(t, path), sessions.WithCap(2), sessions.WithClock(tick))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	s := newStore()
	if _, err := s.Open(ctx, "main", 5); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := s.Apply(ctx, "main", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint("m", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Fork(ctx, "main", "branch", sessions.ForkOptions{KeepFirst: 4, BranchedAt: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, "main", &sessions.Change{DropFirst: 5}); err != nil {
		t.Fatal(err)
	}
	// A third session evicts "main" from the LRU of two.
	if _, err := s.Open(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, "branch", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "b"}}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]*sessions.Record{}
	for _, id := range []string{"main", "branch", "other"} {
		rec, err := s.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = rec
	}
	if n := len(want["main"].Messages); n != 1 {
		t.Fatalf("main has %d messages, want 1", n)
	}
	if n := len(want["branch"].Messages); n != 5 || *want["branch"].BranchedAt != 4 {
		t.Fatalf("branch has %d messages, branched at %d; want 5 and 4", n, *want["branch"].BranchedAt)
	}
	if err := s.Close(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}

	s = newStore()
	for id, w := range want {
		got, err := s.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Messages) != fmt.Sprint(w.Messages) || len(got.Events) < len(w.Events) || got.ParentID != w.ParentID {
			t.Fatalf("%s after reopening: %d messages, %d events, parent %q; want %d, >= %d, %q",
				id, len(got.Messages), len(got.Events), got.ParentID, len(w.Messages), len(w.Events), w.ParentID)
		}
	}
	if got, _ := s.Snapshot(ctx, "main"); got.Status != sessions.StatusCompleted || got.MaxTurns != 5 {
		t.Fatalf("main after reopening: status %s, max turns %d; want completed, 5", got.Status, got.MaxTurns)
	}
	// Resuming a closed session reactivates it and keeps writing at its
	// stored version.
	if o, err := s.Open(ctx, "main", 0); err != nil || o.Created {
		t.Fatalf("Open(main) = %+v, %v", o, err)
	}
	if _, err := s.Apply(ctx, "main", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "again"}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Length(ctx, "main"); err != nil || n != 2 {
		t.Fatalf("Length(main) = %d, %v; want 2", n, err)
	}
}

// TestStoreResumesWithoutLog resumes a session in a new store, which
// loads it without its event log (sessions.PartialLoader): writes keep
// sequencing the log, and a snapshot reads the whole log, leaving out
// events another store wrote after this one's copy went stale.
func TestStoreResumesWithoutLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	ctx := t.Context()
	newStore := func() *sessions.Store {
		s, err := sessions.NewStore(openTest(t, path))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		return s
	}
	first := newStore()
	if _, err := first.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := first.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint("m", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	second := newStore()
	if _, err := second.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	events, err := second.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "m3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Seq != 5 {
		t.Fatalf("events of the append after resuming: %+v, want one with seq 5", events)
	}
	snap, err := second.Snapshot(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := second.Backend().Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// session:started once, when the first store created it: the second
	// resumed it and did not start it again
	if len(snap.Events) != 5 || len(stored.Events) != 5 || len(snap.Messages) != 4 {
		t.Fatalf("snapshot: %d events, %d messages; stored: %d events; want 5, 4, 5", len(snap.Events), len(snap.Messages), len(stored.Events))
	}
	for i := range snap.Events {
		want := sessions.EventMessage
		if i == 0 {
			want = sessions.EventSessionStarted
		}
		if snap.Events[i].Seq != int64(i+1) || snap.Events[i].Type != want {
			t.Fatalf("snapshot event %d: %+v, want %s", i, snap.Events[i], want)
		}
	}

	// A third store resumes it and writes; the second's copy is stale.
	third := newStore()
	if _, err := third.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "m4"}}}); err != nil {
		t.Fatal(err)
	}
	fourth := newStore()
	if _, err := fourth.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := third.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "m5"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err = fourth.Snapshot(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Messages) != 5 || len(snap.Events) != 6 {
		t.Fatalf("stale snapshot: %d messages, %d events; want 5 and 6 (its own copy)", len(snap.Messages), len(snap.Events))
	}
	_, err = fourth.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "late"}}})
	if !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("write through a stale copy: %v, want a conflict", err)
	}
}

// TestStoreRefresh: a store's live copy of a session another process
// wrote since is stale; Refresh drops it, so the next read shows the
// other process's write, and keeps a copy that is current.
func TestStoreRefresh(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	ctx := t.Context()
	newStore := func() *sessions.Store {
		s, err := sessions.NewStore(openClosed(t, path))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newStore(), newStore()
	if err := a.Create(ctx, "s", sessions.Info{}); err != nil {
		t.Fatal(err)
	}
	user := &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}
	if _, err := a.Apply(ctx, "s", user); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "from b"}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Length(ctx, "s"); n != 1 {
		t.Fatalf("a's live copy has %d messages before Refresh, want the stale 1", n)
	}
	if err := a.Refresh(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Length(ctx, "s"); n != 2 {
		t.Fatalf("after Refresh a sees %d messages, want 2", n)
	}
	// a writes again from the reloaded copy: no conflict.
	if _, err := a.Apply(ctx, "s", user); err != nil {
		t.Fatalf("write after Refresh: %v", err)
	}
	// A current copy stays live (its staged change is kept).
	if _, err := a.Stage(ctx, "s", user); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Length(ctx, "s"); n != 4 {
		t.Fatalf("Refresh dropped a current copy: %d messages, want 4", n)
	}
	if err := a.Commit(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.Backend().Load(ctx, "s"); err != nil || len(rec.Messages) != 4 {
		t.Fatalf("stored after commit: %v", err)
	}
}
