package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

func openLazy(t testing.TB, path string) *Lazy {
	t.Helper()
	l, err := OpenLazy(path)
	if err != nil {
		t.Fatalf("OpenLazy(%s): %v", path, err)
	}
	return l
}

func TestLazyBackend(t *testing.T) {
	sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend {
		return openLazy(t, filepath.Join(t.TempDir(), "sessions.db"))
	})
}

func TestLazyDurable(t *testing.T) {
	sessionstest.RunDurableTests(t, func(t *testing.T, path string) sessions.Backend {
		return openLazy(t, path)
	})
}

// TestLazyCreatesOnWrite: reads of a file that does not exist answer as
// an empty store and make nothing, the first create makes the file (and
// its directory), and a file another process created meanwhile is read.
// TestLazyHasTheBackendsInterfaces: every optional interface of package
// sessions that a Backend implements, Lazy implements too (a Store finds
// them by type assertion: one Lazy lacks falls back to a slower path
// without a word).
func TestLazyHasTheBackendsInterfaces(t *testing.T) {
	for _, it := range []reflect.Type{
		reflect.TypeFor[sessions.PartialLoader](), reflect.TypeFor[sessions.VersionReader](),
		reflect.TypeFor[sessions.HistoryBackend](), reflect.TypeFor[sessions.RepoBackend](),
		reflect.TypeFor[sessions.RunBackend](), reflect.TypeFor[sessions.RunWriteBackend](),
		reflect.TypeFor[sessions.EventReader](), reflect.TypeFor[sessions.LockerBackend](),
		reflect.TypeFor[sessions.NotifierBackend](), reflect.TypeFor[sessions.Forgetter](),
	} {
		backend := reflect.TypeFor[*Backend]().Implements(it)
		lazy := reflect.TypeFor[*Lazy]().Implements(it)
		if backend != lazy {
			t.Errorf("%s: implemented by *Backend %v, by *Lazy %v", it, backend, lazy)
		}
	}
}

func TestLazyCreatesOnWrite(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, ".skein", "sessions.db")
	l := openLazy(t, path)
	defer l.Close()

	if ok, err := l.Exists(ctx, "a"); ok || err != nil {
		t.Fatalf("Exists = %v, %v; want false, nil", ok, err)
	}
	if _, err := l.Load(ctx, "a"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Load: %v, want ErrNotFound", err)
	}
	if _, _, err := l.LoadTranscript(ctx, "a"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("LoadTranscript: %v, want ErrNotFound", err)
	}
	if err := l.Write(ctx, "a", 0, &sessions.Change{}); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Write: %v, want ErrNotFound", err)
	}
	if err := l.Delete(ctx, "a", false); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Delete: %v, want ErrNotFound", err)
	}
	if list, total, err := l.List(ctx, sessions.ListFilter{}); len(list) != 0 || total != 0 || err != nil {
		t.Fatalf("List = %v, %d, %v; want nothing", list, total, err)
	}
	if _, err := l.LoadRun(ctx, "r"); !errors.Is(err, sessions.ErrRunNotFound) {
		t.Fatalf("LoadRun: %v, want ErrRunNotFound", err)
	}
	if runs, total, err := l.ListRuns(ctx, sessions.RunFilter{}); len(runs) != 0 || total != 0 || err != nil {
		t.Fatalf("ListRuns = %v, %d, %v; want nothing", runs, total, err)
	}
	if _, _, err := l.StoredVersion(ctx, "a"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("StoredVersion: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reads made %s (%v)", filepath.Dir(path), err)
	}
	if err := l.OpenExisting(); err != nil || l.Opened() {
		t.Fatalf("OpenExisting of a missing file: %v, opened %v; want nil, false", err, l.Opened())
	}

	// another process creates the file: the next read sees its sessions
	other := openTest(t, path)
	now := time.Now()
	if err := other.Create(ctx, &sessions.Record{ID: "from-other", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if ok, err := l.Exists(ctx, "from-other"); !ok || err != nil {
		t.Fatalf("Exists(from-other) = %v, %v; want true", ok, err)
	}
	meta, err := l.LoadMeta(ctx, "from-other")
	if err != nil {
		t.Fatal(err)
	}
	if v, created, err := l.StoredVersion(ctx, "from-other"); err != nil || v != meta.Version || !created.Equal(meta.CreatedAt) {
		t.Fatalf("StoredVersion(from-other) = %d, %v, %v; want %d, %v", v, created, err, meta.Version, meta.CreatedAt)
	}

	// a fresh path: the first create makes the file
	path2 := filepath.Join(dir, "new", "sessions.db")
	l2 := openLazy(t, path2)
	defer l2.Close()
	if err := l2.Create(ctx, &sessions.Record{ID: "a", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path2); err != nil {
		t.Fatalf("Create made no file: %v", err)
	}
}

// TestLazyOpenErrors: a path under a regular file reads as empty, and
// the create that needs it fails; so does a file that is not a session
// database, at every call, until it is fixed.
func TestLazyOpenErrors(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("text"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := &sessions.Record{ID: "a", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}

	under := openLazy(t, filepath.Join(file, "x.db"))
	if ok, err := under.Exists(ctx, "a"); ok || err != nil {
		t.Fatalf("Exists under a file = %v, %v; want false, nil", ok, err)
	}
	if err := under.Create(ctx, rec); err == nil {
		t.Fatal("Create under a file succeeded")
	}

	notDB := filepath.Join(dir, "notadb.db")
	if err := os.WriteFile(notDB, []byte("this is not a database, but it is long enough to have a header of sorts"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLazy(t, notDB)
	for range 2 {
		var oe *OpenError
		if _, err := l.Exists(ctx, "a"); !errors.As(err, &oe) || oe.Path != notDB {
			t.Fatalf("Exists on a file that is not a database: %v, want an *OpenError naming the file", err)
		}
	}
	if err := l.OpenExisting(); err == nil {
		t.Fatal("OpenExisting of a file that is not a database succeeded")
	}
	if err := os.Remove(notDB); err != nil {
		t.Fatal(err)
	}
	if err := l.Create(ctx, rec); err != nil {
		t.Fatalf("Create after the bad file was removed: %v", err)
	}
	l.Close()

	if _, err := OpenLazy(notDB, WithDurability("fast")); err == nil {
		t.Fatal("OpenLazy took an unknown durability")
	}
}
