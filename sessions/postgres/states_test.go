package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// TestStaleStateCache writes through a backend whose cached state of a
// session another handle changed: a write at a version the other handle
// replaced conflicts, and a write at the version of a session the other
// handle deleted and created again (a new row at the same version) lands
// on the new row, read afresh.
func TestStaleStateCache(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openClosed(t, dsn), openClosed(t, dsn)
	ctx := t.Context()
	now := time.Now()
	msg := func(s string) *sessions.Change {
		return &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: s}}}
	}
	rec := func() *sessions.Record {
		return &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}
	}
	if err := a.Create(ctx, rec()); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx, "s", 0, msg("a1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, "s", 1, msg("b1")); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.states.get("s"); !ok {
		t.Fatal("a's write left no cached state")
	}
	if err := a.Write(ctx, "s", 1, msg("stale")); !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("write at a replaced version: %v, want ErrConflict", err)
	}
	if err := a.Write(ctx, "s", 2, msg("a2")); err != nil {
		t.Fatal(err)
	}
	// a caches version 3 of the row; b deletes it and makes a new "s"
	// that reaches version 3 too, with other messages.
	if err := b.Delete(ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, rec()); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"n1", "n2", "n3"} {
		if err := b.Write(ctx, "s", int64(i), msg(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Write(ctx, "s", 3, msg("n4")); err != nil {
		t.Fatalf("write at the new row's version through a stale cache: %v", err)
	}
	got, err := b.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range got.Messages {
		texts = append(texts, m.Text)
	}
	if want := []string{"n1", "n2", "n3", "n4"}; len(texts) != 4 || texts[3] != "n4" || texts[0] != "n1" || got.Version != 4 {
		t.Fatalf("after the write: %v (version %d), want %v (version 4)", texts, got.Version, want)
	}
}
