package sessionstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// RunEventReaderTests checks a sessions.EventReader against the
// backend's whole event log: EventsAfter from several seqs, with and
// without a limit, ErrNotFound for an unknown id, and LastSeqs (0 for an
// empty log, unknown ids left out). newBackend returns a fresh backend
// that is an EventReader.
func RunEventReaderTests(t *testing.T, newBackend func(t *testing.T) sessions.Backend) {
	ctx := context.Background()
	b := newBackend(t)
	r, ok := b.(sessions.EventReader)
	if !ok {
		t.Fatalf("%T is not a sessions.EventReader", b)
	}
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := store.Create(ctx, id, sessions.Info{}); err != nil {
			t.Fatal(err)
		}
	}
	// "c" is stored without the store: its log is empty
	now := time.Now()
	if err := b.Create(ctx, &sessions.Record{ID: "c", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := store.Apply(ctx, "a", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "m"}},
			Events: []sessions.Event{sessions.NewEvent("note", map[string]any{"i": int64(i)})}}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := b.Load(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	all := rec.Events
	for _, after := range []int64{0, 3, int64(len(all)), 100} {
		got, err := r.EventsAfter(ctx, "a", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := all[min(int(after), len(all)):]
		if len(got) != len(want) {
			t.Fatalf("after %d: %d events, want %d", after, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || !got[i].Time.Equal(want[i].Time) ||
				got[i].SessionID != "a" || len(got[i].Data) != len(want[i].Data) {
				t.Fatalf("after %d: event %d is %+v, want %+v", after, i, got[i], want[i])
			}
		}
	}
	if got, err := r.EventsAfter(ctx, "a", 2, 3); err != nil || len(got) != 3 || got[0].Seq != 3 {
		t.Fatalf("limit 3: %v, %v", got, err)
	}
	if _, err := r.EventsAfter(ctx, "nope", 0, 0); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	seqs, err := r.LastSeqs(ctx, []string{"a", "b", "c", "nope"})
	if err != nil || len(seqs) != 3 || seqs["a"] != all[len(all)-1].Seq || seqs["b"] != 1 || seqs["c"] != 0 {
		t.Fatalf("LastSeqs: %v, %v", seqs, err)
	}
}
