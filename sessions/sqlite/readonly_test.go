package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// TestReadOnly opens a database read-only: it reads what is stored,
// refuses writes, creates no file, and sends a database of an older schema
// (which it cannot migrate) back to a writable Open.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	if _, err := Open(path, ReadOnly()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadOnly open of a missing file: %v, want fs.ErrNotExist", err)
	}
	b := openTest(t, path)
	now := time.Now().UTC()
	rec := &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
		Messages: []message.Message{{Role: message.RoleUser, Text: "hello"}}}
	if err := b.Create(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	b.Close()

	ro, err := Open(path, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Load(t.Context(), "s")
	if err != nil || len(got.Messages) != 1 || got.Messages[0].Text != "hello" {
		t.Fatalf("Load read-only: %v, %+v", err, got)
	}
	if err := ro.Create(t.Context(), &sessions.Record{ID: "new", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err == nil {
		t.Fatal("Create through a read-only backend succeeded")
	}

	old := filepath.Join(dir, "v1.db")
	db := rawDB(t, old)
	for _, q := range []string{migrations[0], fmt.Sprintf("PRAGMA user_version = 1; PRAGMA application_id = %d", applicationID)} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if _, err := Open(old, ReadOnly()); !errors.Is(err, ErrNeedsMigration) {
		t.Fatalf("ReadOnly open of a version 1 database: %v, want ErrNeedsMigration", err)
	}
}
