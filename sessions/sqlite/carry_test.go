package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// TestCarriedLocksUnderWrites: locks taken and released while sessions
// are written (their statements carried by those writes, or committed
// on their own) exclude each other across two Backends on one file, as
// two processes would; every write is stored, and no lock row is left.
func TestCarriedLocksUnderWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	backends := []*Backend{openClosed(t, path), openClosed(t, path)}
	lockers := []sessions.Locker{newTestLocker(t, backends[0]), newTestLocker(t, backends[1])}
	ctx := t.Context()
	now := time.Now()
	const workers, rounds, names = 6, 30, 3
	for i := range workers {
		if err := backends[i%2].Create(ctx, &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	var holders [names]atomic.Int32
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			be, l := backends[i%2], lockers[(i/2)%2]
			id := fmt.Sprint("s", i)
			version := int64(0)
			for r := range rounds {
				name := fmt.Sprint("n", (i+r)%names)
				lk, err := l.TryLock(ctx, name)
				if errors.Is(err, sessions.ErrLocked) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := holders[(i+r)%names].Add(1); n != 1 {
					t.Errorf("%d holders of %s", n, name)
				}
				err = be.Write(ctx, id, version, &sessions.Change{UpdatedAt: now, Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint(r)}}})
				holders[(i+r)%names].Add(-1)
				if uerr := lk.Unlock(ctx); uerr != nil {
					t.Error(uerr)
				}
				if err != nil {
					t.Error(err)
					return
				}
				version++
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var rows int
	if err := rawDB(t, path).QueryRowContext(ctx, `SELECT count(*) FROM locks`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d lock rows left (%v)", rows, err)
	}
	if held, err := lockers[0].Held(ctx, []string{"n0", "n1", "n2"}); err != nil || len(held) != 0 {
		t.Fatalf("Held after every Unlock: %v, %v", held, err)
	}
}
