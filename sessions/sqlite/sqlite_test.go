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
	"github.com/skein-dev/skein/sessions/internal/rowstore/rowstoretest"
	"github.com/skein-dev/skein/sessions/message"
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
		Messages: []message.Message{{Role: message.RoleUser, Text: "hi"}}}
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

// raw reaches a backend's tables through its own database handle.
type raw struct{ b *Backend }

func (r raw) Table(kind string) string { return kind }

func (r raw) Exec(query string) error {
	_, err := r.b.db.Exec(query)
	return err
}

// Count counts sessions and views rows, and the messages and events
// the rows of table writes hold.
func (r raw) Count(kind string) (n int, err error) {
	switch kind {
	case "messages":
		err = r.b.db.QueryRow(`SELECT coalesce(sum(pos_end - pos), 0) FROM writes`).Scan(&n)
	case "events":
		err = eachRow(context.Background(), r.b.db, `SELECT seq, events FROM writes`, nil, func(rows *sql.Rows) error {
			var seq int64
			var blob []byte
			if err := rows.Scan(&seq, &blob); err != nil {
				return err
			}
			return eachEvent(blob, seq, func(*storedEvent) error { n++; return nil })
		})
	default:
		err = r.b.db.QueryRow("SELECT count(*) FROM " + r.Table(kind)).Scan(&n)
	}
	return n, err
}

// Damage rewrites the writes row that holds message pos of session id
// with body in place of the message's, its checksum unchanged.
func (r raw) Damage(id string, pos int64, body string) error {
	var sid, key, first int64
	var blob []byte
	if err := r.b.db.QueryRow(`SELECT sid FROM sessions WHERE id = ?`, id).Scan(&sid); err != nil {
		return err
	}
	lo, hi := sessionKeys(sid)
	err := r.b.db.QueryRow(`SELECT key, pos, messages FROM writes WHERE key >= ? AND key < ? AND pos <= ? AND pos_end > ?`,
		lo, hi, pos, pos).Scan(&key, &first, &blob)
	if err != nil {
		return err
	}
	var out []byte
	err = eachMessage(blob, func(m storedMessage) error {
		if first == pos {
			m.body = []byte(body)
		}
		out = appendMessage(out, m.body, m.sum)
		first++
		return nil
	})
	if err == nil {
		_, err = r.b.db.Exec(`UPDATE writes SET messages = ? WHERE key = ?`, out, key)
	}
	return err
}

func TestRows(t *testing.T) {
	rowstoretest.Run(t, func(t *testing.T) (sessions.Backend, rowstoretest.Raw) {
		b := openTest(t, filepath.Join(t.TempDir(), "sessions.db"))
		return b, raw{b}
	})
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

// TestFieldChecksums flips a byte of each payload besides message bodies
// (title, summary, metadata, first prompt, event data) in the database
// file and its WAL and expects loads to fail naming the session and the
// field.
func TestFieldChecksums(t *testing.T) {
	sessionstest.RunFieldChecksumTests(t, func(t *testing.T, path string) sessions.Backend {
		return openTest(t, path)
	}, flipInFile)
}
