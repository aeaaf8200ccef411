package sessionstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// RunLockerTests runs the conformance tests of a sessions.Locker.
// newLockers returns two Lockers over one fresh backend, standing for
// two processes that share it (a Locker of one process only returns the
// same Locker twice); the suite closes them. It checks that:
//
//   - a lock excludes every other holder, of either Locker or the same;
//   - Held tells held names from free ones, through either Locker;
//   - Interrupt reaches the holder (Interrupted closes, with the reason)
//     and reports whether the lock was held;
//   - Unlock frees the lock (twice is harmless), and Close frees every
//     lock of its Locker and interrupts them.
func RunLockerTests(t *testing.T, newLockers func(t *testing.T) (a, b sessions.Locker)) {
	ctx := context.Background()
	t.Run("Exclusive", func(t *testing.T) {
		a, b := lockers(t, newLockers)
		lk, err := a.TryLock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []sessions.Locker{a, b} {
			if _, err := l.TryLock(ctx, "x"); !errors.Is(err, sessions.ErrLocked) {
				t.Fatalf("second TryLock: %v, want ErrLocked", err)
			}
		}
		other, err := b.TryLock(ctx, "y")
		if err != nil {
			t.Fatalf("another name: %v", err)
		}
		for _, l := range []sessions.Locker{a, b} {
			held, err := l.Held(ctx, []string{"x", "y", "z"})
			if err != nil {
				t.Fatal(err)
			}
			if !held["x"] || !held["y"] || held["z"] || len(held) != 2 {
				t.Fatalf("Held: %v", held)
			}
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatalf("second Unlock: %v", err)
		}
		again, err := b.TryLock(ctx, "x")
		if err != nil {
			t.Fatalf("TryLock after Unlock: %v", err)
		}
		// The first holder's late Unlock does not free the new holder's lock.
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.TryLock(ctx, "x"); !errors.Is(err, sessions.ErrLocked) {
			t.Fatalf("TryLock after a stale Unlock: %v, want ErrLocked", err)
		}
		again.Unlock(ctx)
		other.Unlock(ctx)
		if held, err := a.Held(ctx, []string{"x", "y"}); err != nil || len(held) != 0 {
			t.Fatalf("Held after Unlock: %v, %v", held, err)
		}
	})
	t.Run("Interrupt", func(t *testing.T) {
		a, b := lockers(t, newLockers)
		if ok, err := b.Interrupt(ctx, "x", "why"); err != nil || ok {
			t.Fatalf("Interrupt of a free lock: %v, %v", ok, err)
		}
		lk, err := a.TryLock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-lk.Interrupted():
			t.Fatal("interrupted before Interrupt")
		default:
		}
		if lk.Reason() != "" {
			t.Fatalf("Reason before Interrupt: %q", lk.Reason())
		}
		if ok, err := b.Interrupt(ctx, "x", "why"); err != nil || !ok {
			t.Fatalf("Interrupt: %v, %v", ok, err)
		}
		select {
		case <-lk.Interrupted():
		case <-time.After(10 * time.Second):
			t.Fatal("the holder was not interrupted")
		}
		if lk.Reason() != "why" {
			t.Fatalf("Reason %q, want why", lk.Reason())
		}
		// Interrupted, the lock is still held until it is unlocked.
		if _, err := b.TryLock(ctx, "x"); !errors.Is(err, sessions.ErrLocked) {
			t.Fatalf("TryLock of an interrupted lock: %v, want ErrLocked", err)
		}
		lk.Unlock(ctx)
		if _, err := b.TryLock(ctx, "x"); err != nil {
			t.Fatalf("TryLock after Unlock: %v", err)
		}
	})
	t.Run("Close", func(t *testing.T) {
		a, b := lockers(t, newLockers)
		lk, err := a.TryLock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			return // one process: nothing outlives its Close
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lk.Interrupted():
		default:
			t.Fatal("Close did not interrupt a held lock")
		}
		if _, err := b.TryLock(ctx, "x"); err != nil {
			t.Fatalf("TryLock after the holder's Close: %v", err)
		}
		if names, err := b.Abandoned(ctx, 0); err != nil || len(names) != 0 {
			t.Fatalf("Abandoned after a Close: %v, %v", names, err)
		}
	})
}

// lockers returns newLockers' pair, closed when the test ends.
func lockers(t *testing.T, newLockers func(t *testing.T) (a, b sessions.Locker)) (sessions.Locker, sessions.Locker) {
	a, b := newLockers(t)
	t.Cleanup(func() {
		a.Close()
		if b != a {
			b.Close()
		}
	})
	return a, b
}

// CheckLockVersionHandoff checks one hand-off of lock name between two
// processes through VersionLocker: b takes the lock (a is refused), a
// message is appended to session id through store, b releases the lock,
// between runs (nil or a test's change, e.g. a dead holder's row), and a
// takes the lock with the session's version, which must be what
// reader, over the store's backend, reads as stored: the write b made
// under the lock is seen. a's lock is released at the end.
func CheckLockVersionHandoff(t *testing.T, store *sessions.Store, reader sessions.VersionReader, a, b sessions.VersionLocker, name, id string, between func()) {
	t.Helper()
	ctx := context.Background()
	lk, _, err := b.TryLockVersion(ctx, name, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.TryLockVersion(ctx, name, id); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLockVersion of a held lock: %v", err)
	}
	if _, err := store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	lk, v, err := a.TryLockVersion(ctx, name, id)
	if err != nil {
		t.Fatal(err)
	}
	want, created, err := reader.StoredVersion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Err != nil || v.Version != want || !v.Created.Equal(created) {
		t.Fatalf("TryLockVersion after the hand-off read %+v, stored version %d created %s", v, want, created)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// CheckLockVersionMissing checks that TryLockVersion of a session that is
// not stored takes the lock all the same (held, as seen through
// observer) and reports ErrNotFound as the version's error; the lock is
// released at the end.
func CheckLockVersionMissing(t *testing.T, l sessions.VersionLocker, observer sessions.Locker) {
	t.Helper()
	ctx := context.Background()
	lk, v, err := l.TryLockVersion(ctx, "turn/missing", "missing")
	if err != nil || !errors.Is(v.Err, sessions.ErrNotFound) {
		t.Fatalf("TryLockVersion of a missing session: %+v, %v", v, err)
	}
	if held, err := observer.Held(ctx, []string{"turn/missing"}); err != nil || !held["turn/missing"] {
		t.Fatalf("the lock taken with a missing session's version: %v, %v", held, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
