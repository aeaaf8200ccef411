package sqlite

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// testPoll is the lock poll interval of the tests.
const testPoll = 10 * time.Millisecond

// TestLocker runs the conformance tests with two Backends on one file,
// as two processes would have.
func TestLocker(t *testing.T) {
	sessionstest.RunLockerTests(t, func(t *testing.T) (sessions.Locker, sessions.Locker) {
		path := filepath.Join(t.TempDir(), "sessions.db")
		return newTestLocker(t, openClosed(t, path)), newTestLocker(t, openClosed(t, path))
	})
}

func newTestLocker(t *testing.T, b *Backend) sessions.Locker {
	t.Helper()
	l, err := b.NewLocker(testPoll)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to wait for: %v", err)
	}
	return cmd.ProcessState.Pid()
}

// TestLockOfDeadHolder pins how a lock outlives its holder: a lock of a
// process of this machine that no longer exists is free at once (and
// listed as abandoned until it is taken); a lock of another machine's
// process is held until its lease runs out.
func TestLockOfDeadHolder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no process check on windows: locks outlive their holder by the lease")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := openClosed(t, path)
	l := newTestLocker(t, b)
	db := rawDB(t, path)
	future, past := time.Now().Add(time.Hour).UnixNano(), time.Now().Add(-time.Second).UnixNano()
	for _, row := range []struct {
		name, host string
		pid        int
		expires    int64
	}{
		{"dead", processHost(), deadPID(t), future},
		{"elsewhere", "another machine", 1, future},
		{"expired", "another machine", 1, past},
	} {
		if _, err := db.Exec(`INSERT INTO locks (name, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?)`,
			row.name, "token-"+row.name, row.host, row.pid, row.expires); err != nil {
			t.Fatal(err)
		}
	}
	held, err := l.Held(ctx, []string{"dead", "elsewhere", "expired"})
	if err != nil || len(held) != 1 || !held["elsewhere"] {
		t.Fatalf("Held: %v, %v", held, err)
	}
	names, err := l.Abandoned(ctx, 0)
	if err != nil || len(names) != 2 || names[0] != "dead" || names[1] != "expired" {
		t.Fatalf("Abandoned: %v, %v", names, err)
	}
	if ok, err := l.Interrupt(ctx, "dead", "why"); ok || err != nil {
		t.Fatalf("Interrupt of an abandoned lock: %v, %v", ok, err)
	}
	if _, err := l.TryLock(ctx, "elsewhere"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLock of a lock held elsewhere: %v", err)
	}
	lk, err := l.TryLock(ctx, "dead")
	if err != nil {
		t.Fatalf("TryLock of an abandoned lock: %v", err)
	}
	if names, err := l.Abandoned(ctx, 0); err != nil || len(names) != 1 || names[0] != "expired" {
		t.Fatalf("Abandoned after taking one: %v, %v", names, err)
	}
	lk.Unlock(ctx)
}

// TestLockLost pins that a holder whose lock was taken from it (its
// lease ran out while it stalled) is told so.
func TestLockLost(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	l := newTestLocker(t, openClosed(t, path))
	lk, err := l.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE locks SET holder = 'thief'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Interrupted():
	case <-time.After(10 * time.Second):
		t.Fatal("a lost lock was not reported")
	}
	if lk.Reason() != sessions.ReasonLockLost {
		t.Fatalf("Reason %q", lk.Reason())
	}
}

// TestLockTakenWhileClosing pins that a lock taken while the locker
// closes is released with the others, not left in the table: TryLock
// passes its closed check, then waits for the write lock while Close
// runs.
func TestLockTakenWhileClosing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := openClosed(t, path)
	l, err := b.NewLocker(testPoll)
	if err != nil {
		t.Fatal(err)
	}
	b.wmu.Lock() // TryLock's write waits here
	taken := make(chan error, 1)
	go func() {
		_, err := l.TryLock(ctx, "x")
		taken <- err
	}()
	time.Sleep(50 * time.Millisecond) // TryLock is past its closed check
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	time.Sleep(50 * time.Millisecond) // Close is waiting for it
	b.wmu.Unlock()
	if err := <-taken; err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM locks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d locks left in the table after Close", n)
	}
}

// TestEventsAfter runs the event reader's conformance tests.
func TestEventsAfter(t *testing.T) {
	sessionstest.RunEventReaderTests(t, func(t *testing.T) sessions.Backend {
		return openClosed(t, filepath.Join(t.TempDir(), "sessions.db"))
	})
}

// TestLazyLocker runs the conformance tests with two Lazy backends on a
// file that does not exist yet: answers create nothing, the first lock
// creates the file.
func TestLazyLocker(t *testing.T) {
	sessionstest.RunLockerTests(t, func(t *testing.T) (sessions.Locker, sessions.Locker) {
		path := filepath.Join(t.TempDir(), "sessions.db")
		newLazy := func() sessions.Locker {
			l, err := OpenLazy(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			lk, err := l.NewLocker(testPoll)
			if err != nil {
				t.Fatal(err)
			}
			return lk
		}
		a, b := newLazy(), newLazy()
		if held, err := a.Held(context.Background(), []string{"x"}); err != nil || len(held) != 0 || fileExists(path) {
			t.Fatalf("Held before any lock: %v, %v (file made: %v)", held, err, fileExists(path))
		}
		return a, b
	})
}

// TestTryLockVersion: the lock taken with a session's version reads the
// version stored when the lock was taken (the last write of another
// Backend's holder that released it included), whether the lock had no
// row or the row of a dead holder; a missing session reads as
// ErrNotFound with the lock held; a held lock is ErrLocked. Through the
// Lazy backend's locker too.
func TestTryLockVersion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	a, b := openClosed(t, path), openClosed(t, path)
	lazy := openLazy(t, path)
	t.Cleanup(func() { lazy.Close() })
	ll, err := lazy.NewLocker(testPoll)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ll.Close() })
	lb := newTestLocker(t, b).(sessions.VersionLocker)
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, "s", sessions.Info{}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for round, la := range []sessions.VersionLocker{newTestLocker(t, a).(sessions.VersionLocker), ll.(sessions.VersionLocker)} {
		for _, dead := range []bool{false, true} {
			t.Logf("locker %d, dead holder %v", round, dead)
			// b writes under the lock and releases it; a takes it next.
			var between func()
			if dead {
				// The row of a holder that died: the transaction path.
				between = func() {
					if _, err := db.Exec(`INSERT INTO locks (name, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?)`,
						"turn/s", "token-dead", processHost(), deadPID(t), time.Now().Add(time.Hour).UnixNano()); err != nil {
						t.Fatal(err)
					}
				}
			}
			sessionstest.CheckLockVersionHandoff(t, store, b, la, lb, "turn/s", "s", between)
		}
	}
	sessionstest.CheckLockVersionMissing(t, lb, ll)
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM locks`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("lock rows after every unlock: %d, %v", rows, err)
	}
}
