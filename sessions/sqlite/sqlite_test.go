package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// openTest opens a backend on path. It does not close it: the suite does,
// or the caller.
func openTest(t testing.TB, path string) *Backend {
	t.Helper()
	b, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return b
}

// openClosed opens a backend that the test's cleanup closes.
func openClosed(t testing.TB, path string) *Backend {
	t.Helper()
	b := openTest(t, path)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestBackend(t *testing.T) {
	sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend {
		return openTest(t, filepath.Join(t.TempDir(), "sessions.db"))
	})
}

func TestDurable(t *testing.T) {
	sessionstest.RunDurableTests(t, func(t *testing.T, path string) sessions.Backend {
		return openTest(t, path)
	})
}

func TestMigrationsMatchSchemaVersion(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d migrations, SchemaVersion %d", len(migrations), SchemaVersion)
	}
}

// pragma reads an integer or text PRAGMA through a plain connection.
func pragma[T any](t *testing.T, db *sql.DB, name string) T {
	t.Helper()
	var v T
	if err := db.QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// rawDB opens path without this package, as another tool would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenCreatesAndMigrates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work", ".skein")
	path := filepath.Join(dir, "sessions.db")
	b := openTest(t, path)
	if b.Path() != path {
		t.Errorf("Path() = %q, want %q", b.Path(), path)
	}
	ctx := t.Context()
	rec := &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Messages: []sessions.Message{{Role: sessions.RoleUser, Text: "hi"}}}
	if err := b.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}

	for name, want := range map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	db := rawDB(t, path)
	if v := pragma[int](t, db, "user_version"); v != SchemaVersion {
		t.Errorf("user_version %d, want %d", v, SchemaVersion)
	}
	if v := pragma[int](t, db, "application_id"); v != applicationID {
		t.Errorf("application_id %#x, want %#x", v, applicationID)
	}
	if v := pragma[string](t, db, "journal_mode"); v != "wal" {
		t.Errorf("journal_mode %q, want wal", v)
	}
	if v := pragma[int](t, db, "page_size"); v != pageSize {
		t.Errorf("page_size %d, want %d", v, pageSize)
	}
	var fk, sync, busy int
	if err := b.read(ctx, func(tx *sql.Tx) error {
		for q, dst := range map[string]*int{"foreign_keys": &fk, "synchronous": &sync, "busy_timeout": &busy} {
			if err := tx.QueryRow("PRAGMA " + q).Scan(dst); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fk != 1 || sync != 1 || busy != int(BusyTimeout.Milliseconds()) {
		t.Errorf("connection pragmas: foreign_keys %d, synchronous %d, busy_timeout %d; want 1, 1 (NORMAL: the default durability, process), %d",
			fk, sync, busy, BusyTimeout.Milliseconds())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// Reopening migrates nothing and keeps everything.
	for range 2 {
		b = openClosed(t, path)
		got, err := b.Load(ctx, "s")
		if err != nil || len(got.Messages) != 1 {
			t.Fatalf("Load after reopen: %v, %v", got, err)
		}
		b.Close()
	}
	if v := pragma[int](t, db, "user_version"); v != SchemaVersion {
		t.Errorf("user_version after reopen %d, want %d", v, SchemaVersion)
	}
}

func TestOpenExistingEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	openClosed(t, path)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("an existing file's mode changed: %v, %v", fi.Mode(), err)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()

	newer := filepath.Join(dir, "newer.db")
	openTest(t, newer).Close()
	if _, err := rawDB(t, newer).Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}

	foreign := filepath.Join(dir, "foreign.db")
	if _, err := rawDB(t, foreign).Exec("CREATE TABLE sessions (x)"); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(dir, "other.db")
	if _, err := rawDB(t, other).Exec("PRAGMA application_id = 42"); err != nil {
		t.Fatal(err)
	}

	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, want string }{
		{newer, fmt.Sprintf("schema version %d is newer than this skein supports (%d)", SchemaVersion+1, SchemaVersion)},
		{foreign, "not a skein session database"},
		{other, "not a skein session database (application_id 0x2a"},
		{garbage, "not a database"},
		{"", "empty database path"},
	} {
		b, err := Open(tc.path)
		if err == nil {
			b.Close()
			t.Errorf("Open(%s): no error", tc.path)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want an error containing %q", tc.path, err, tc.want)
		}
	}
	// A refused file is left as it was.
	if v := pragma[string](t, rawDB(t, foreign), "journal_mode"); v != "delete" {
		t.Errorf("journal_mode of a refused database changed to %q", v)
	}
}

// counts returns the number of rows in each table.
func counts(t testing.TB, b *Backend) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"sessions", "views", "messages", "events"} {
		var n int
		if err := b.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// TestStorageSharing checks the row counts behind the fork-sharing design:
// forks, trims and deletes write no message rows, a reset writes only its
// replacement, and frozen views go when nothing uses them.
func TestStorageSharing(t *testing.T) {
	b := openClosed(t, filepath.Join(t.TempDir(), "sessions.db"))
	ctx := t.Context()
	msgs := make([]sessions.Message, 1000)
	for i := range msgs {
		msgs[i] = sessions.Message{Role: sessions.RoleUser, Text: fmt.Sprint(i)}
	}
	now := time.Now()
	if err := b.Create(ctx, &sessions.Record{ID: "p", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	version := int64(0)
	fork := func(src, dst string, keep int) {
		t.Helper()
		spec := &sessions.ForkSpec{Src: src, SrcVersion: version, KeepFirst: keep, SrcTime: now,
			SrcEvent: sessions.Event{Seq: version + 1, Type: sessions.EventFork, Time: now},
			Dst:      sessions.Record{ID: dst, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, ParentID: src}}
		if err := b.Fork(ctx, spec); err != nil {
			t.Fatal(err)
		}
		version++
	}
	write := func(id string, base int64, ch *sessions.Change) {
		t.Helper()
		if err := b.Write(ctx, id, base, ch); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"sessions": 1, "views": 0, "messages": 1000, "events": 0}
	check := func(step string) {
		t.Helper()
		if got := counts(t, b); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: rows %v, want %v", step, got, want)
		}
	}
	check("create")
	fork("p", "c1", 1000)
	want["sessions"], want["views"], want["events"] = 2, 1, 1
	check("fork of 1000 messages")
	fork("p", "c2", 10)
	want["sessions"], want["views"], want["events"] = 3, 2, 2
	check("second fork")

	write("p", version, &sessions.Change{DropFirst: 500})
	check("trim")
	write("p", version+1, &sessions.Change{Replace: true, ReplaceWith: msgs[:3]})
	want["messages"] += 3
	check("reset")

	// c1's view rests on p's frozen view; a grandchild inside c1's shared
	// part shares that directly.
	spec := &sessions.ForkSpec{Src: "c1", SrcVersion: 0, KeepFirst: 7, SrcTime: now,
		SrcEvent: sessions.Event{Seq: 1, Type: sessions.EventFork, Time: now},
		Dst:      sessions.Record{ID: "g", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, ParentID: "c1"}}
	if err := b.Fork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["events"] = 4, 3
	check("fork inside the shared part")

	if err := b.Delete(ctx, "c2", false); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["views"] = 3, 1
	check("delete of a fork frees its frozen view")
	write("c1", 1, &sessions.Change{DropFirst: 1000})
	check("c1 trimmed past its base, which g still uses")
	if err := b.Delete(ctx, "g", false); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["views"] = 2, 0
	check("last user of a frozen view gone")
}

// TestDeleteKeepsForkRows checks the database's own guard: even a delete
// this package did not make cannot remove the rows a fork's view uses.
func TestDeleteKeepsForkRows(t *testing.T) {
	b := openClosed(t, filepath.Join(t.TempDir(), "sessions.db"))
	ctx := context.Background()
	now := time.Now()
	rec := &sessions.Record{ID: "p", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
		Messages: []sessions.Message{{Role: sessions.RoleUser, Text: "shared"}}}
	if err := b.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	spec := &sessions.ForkSpec{Src: "p", KeepFirst: 1, SrcEvent: sessions.Event{Seq: 1, Type: sessions.EventFork, Time: now},
		Dst: sessions.Record{ID: "c", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}}
	if err := b.Fork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec("DELETE FROM sessions WHERE id = 'p'"); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("deleting a forked session's row directly: %v, want a foreign key error", err)
	}
	got, err := b.Load(ctx, "c")
	if err != nil || len(got.Messages) != 1 || got.Messages[0].Text != "shared" || got.ParentID != "p" {
		t.Fatalf("fork after the refused delete: %+v, %v", got, err)
	}
}

// TestLoadLong loads sessions long enough for several decoding workers
// and checks that every message and event comes back in place, and that a
// damaged row fails the load.
func TestLoadLong(t *testing.T) {
	b := openClosed(t, filepath.Join(t.TempDir(), "sessions.db"))
	ctx := t.Context()
	const n = 5*decodeBatch + 17
	now := time.Now().UTC()
	rec := &sessions.Record{ID: "long", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}
	for i := range n {
		rec.Messages = append(rec.Messages, sessions.Message{Role: sessions.RoleUser, Text: fmt.Sprint("m", i),
			Metadata: map[string]any{"i": int64(i), "f": float64(i)}})
		e := sessions.Event{Seq: int64(i + 1), Type: "e", SessionID: "long", Time: now.Add(time.Duration(i))}
		if i%3 != 0 {
			e.Data = map[string]any{"i": int64(i)}
		}
		rec.Events = append(rec.Events, e)
	}
	if err := b.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != n || len(got.Events) != n {
		t.Fatalf("%d messages and %d events, want %d each", len(got.Messages), len(got.Events), n)
	}
	for i := range n {
		if m := got.Messages[i]; m.Text != rec.Messages[i].Text || m.Metadata["i"] != int64(i) || m.Metadata["f"] != float64(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
		if e := got.Events[i]; e.Seq != int64(i+1) || !e.Time.Equal(rec.Events[i].Time) || (e.Data == nil) != (i%3 == 0) ||
			(e.Data != nil && e.Data["i"] != int64(i)) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}

	if _, err := b.db.Exec(`UPDATE messages SET body = '{"role": 7}' WHERE pos = 4000`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, "long"); err == nil || !strings.Contains(err.Error(), "message 4000") {
		t.Fatalf("Load with a damaged message row: %v, want an error naming message 4000", err)
	}
}

// TestBatchReleasesViews checks that a view frozen by a rewind (DropLast)
// that a later change of the same Write resets away is deleted with the
// write, as it would be by two Writes.
func TestBatchReleasesViews(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	now := time.Now()
	if err := b.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	msgs := []sessions.Message{{Role: sessions.RoleUser, Text: "a"}, {Role: sessions.RoleUser, Text: "b"}, {Role: sessions.RoleUser, Text: "c"}}
	if err := b.Write(ctx, "s", 0, &sessions.Change{Append: msgs}, &sessions.Change{DropLast: 1}); err != nil {
		t.Fatal(err)
	}
	if n := counts(t, b)["views"]; n != 1 {
		t.Fatalf("after a rewind: %d views, want 1", n)
	}
	if err := b.Write(ctx, "s", 2, &sessions.Change{DropLast: 1}, &sessions.Change{Replace: true, ReplaceWith: msgs[:1]}); err != nil {
		t.Fatal(err)
	}
	if n := counts(t, b)["views"]; n != 0 {
		t.Fatalf("after a rewind and a reset in one write: %d views, want 0", n)
	}
}

// TestChecksums flips one byte of a message's text in the database file
// (SQLite keeps no checksum of its own pages) and expects the load to
// fail naming the session and the message.
func TestChecksums(t *testing.T) {
	sessionstest.RunChecksumTests(t, func(t *testing.T, path string) sessions.Backend {
		return openTest(t, path)
	}, flipInFile)
}

// flipInFile changes the last byte of marker wherever it is in the
// database file and its WAL.
func flipInFile(t *testing.T, path, marker string) {
	found := false
	for _, p := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := bytes.Index(data, []byte(marker)); i >= 0; i = bytes.Index(data, []byte(marker)) {
			data[i+len(marker)-1] ^= 0x01
			found = true
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("%q is in neither %s nor its WAL", marker, path)
	}
}
