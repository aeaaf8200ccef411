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

// TestKnownStateOfFailedCommit: a write whose commit fails leaves no
// known state behind, so that a later write at the version that write
// would have reached, which another writer reached instead, reads the
// session's row rather than trusting the failed write's state.
func TestKnownStateOfFailedCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	a, other := openClosed(t, path), openClosed(t, path)
	raw := rawDB(t, path)
	ctx := t.Context()
	now := time.Now()
	appendText := func(be *Backend, base int64, texts ...string) error {
		ch := &sessions.Change{UpdatedAt: now}
		for _, text := range texts {
			ch.Append = append(ch.Append, message.Message{Role: message.RoleUser, Text: text})
		}
		return be.Write(ctx, "s", base, ch)
	}
	if err := other.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := appendText(other, 0, "m1"); err != nil {
		t.Fatal(err)
	}
	// A deferred foreign key that an insert into writes violates fails
	// the commit, after every statement of the write succeeded.
	for _, q := range []string{
		`CREATE TABLE trap_parent (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE trap (p INTEGER REFERENCES trap_parent (id) DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE TRIGGER trap_writes AFTER INSERT ON writes BEGIN INSERT INTO trap VALUES (1); END`,
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := appendText(a, 1, "lost"); err == nil {
		t.Fatal("the write whose commit fails succeeded")
	}
	if _, err := raw.ExecContext(ctx, `DROP TRIGGER trap_writes`); err != nil {
		t.Fatal(err)
	}
	if err := appendText(other, 1, "o1", "o2"); err != nil {
		t.Fatal(err)
	}
	if err := appendText(a, 2, "a3"); err != nil {
		t.Fatal(err)
	}
	wantTexts(t, other, "s", "m1 o1 o2 a3", 3)
}

// TestWritersWaitForEachOther has two Backends on one file (as two
// processes would) append to a session each, at once: a write that is
// only its row, one INSERT on its own, waits for the other's write lock
// as a transaction begun IMMEDIATE does, so every write succeeds.
func TestWritersWaitForEachOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	bes := []*Backend{openClosed(t, path), openClosed(t, path)}
	ctx := t.Context()
	now := time.Now()
	const n = 300
	errs := make(chan error, len(bes))
	for i, be := range bes {
		id := fmt.Sprint("s", i)
		if err := be.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for v := range int64(n) {
				ch := &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint(v)}}, UpdatedAt: now}
				if err := be.Write(ctx, id, v, ch); err != nil {
					errs <- fmt.Errorf("%s, write %d: %w", id, v, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range bes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, be := range bes {
		rec, err := be.Load(ctx, fmt.Sprint("s", i))
		if err != nil || len(rec.Messages) != n || rec.Version != n || rec.Messages[n-1].Text != fmt.Sprint(n-1) {
			t.Fatalf("s%d: %v", i, err)
		}
	}
}

// TestKnownStateOfCreate: a session's first write follows the state its
// creation stored, without reading it; and when another writer deleted
// and created the session again meanwhile, that write is refused as a
// conflict rather than made on the old state.
func TestKnownStateOfCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	a, other := openClosed(t, path), openClosed(t, path)
	ctx := t.Context()
	now := time.Now()
	create := func(be *Backend, id string) {
		t.Helper()
		if err := be.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
			Messages: []message.Message{{Role: message.RoleSystem, Text: "sys"}}, Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(be *Backend, id string, base int64, text string) error {
		return be.Write(ctx, id, base, &sessions.Change{UpdatedAt: now, Append: []message.Message{{Role: message.RoleUser, Text: text}}})
	}
	create(a, "s")
	a.wmu.Lock()
	known := a.known.get("s", 1) != nil
	a.wmu.Unlock()
	if !known {
		t.Fatal("Create left no known state")
	}
	if err := write(a, "s", 1, "u1"); err != nil {
		t.Fatal(err)
	}
	wantTexts(t, other, "s", "sys u1", 2)

	create(a, "t")
	if err := other.Delete(ctx, "t", false); err != nil {
		t.Fatal(err)
	}
	create(other, "t")
	if err := write(other, "t", 1, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := write(a, "t", 1, "stale"); !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("write on the state of a deleted session: %v, want ErrConflict", err)
	}
	wantTexts(t, a, "t", "sys o1", 2)
}
