package sqlite

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// TestOpenConcurrently opens a new database from several backends at
// once, as processes starting together would: the schema is created
// once and every backend works.
func TestOpenConcurrently(t *testing.T) {
	const n = 6
	path := filepath.Join(t.TempDir(), ".skein", "sessions.db")
	var wg sync.WaitGroup
	backends := make([]*Backend, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { backends[i], errs[i] = Open(path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { backends[i].Close() })
	}
	ctx := t.Context()
	now := time.Now()
	for i, b := range backends {
		if err := b.Create(ctx, &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range backends {
		if _, total, err := b.List(ctx, sessions.ListFilter{}); err != nil || total != n {
			t.Fatalf("List: %d sessions, %v; want %d", total, err, n)
		}
	}
	if v := pragma[int](t, rawDB(t, path), "user_version"); v != SchemaVersion {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion)
	}
}

// TestDurability checks that each durability level sets SQLite's
// synchronous mode on every connection, and that an unknown level is
// refused.
func TestDurability(t *testing.T) {
	for _, tc := range []struct {
		d    sessions.Durability
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"", 1},
		{sessions.DurabilityProcess, 1},
		{sessions.DurabilityFull, 2},
	} {
		path := filepath.Join(t.TempDir(), "sessions.db")
		var opts []Option
		if tc.d != "" {
			opts = append(opts, WithDurability(tc.d))
		}
		b, err := Open(path, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if tc.d != "" && b.Durability() != tc.d {
			t.Errorf("Durability() = %q, want %q", b.Durability(), tc.d)
		}
		// Hold two connections at once: each must have the setting.
		ctx := t.Context()
		for range 2 {
			conn, err := b.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var got int
			if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("durability %q: PRAGMA synchronous = %d, want %d", tc.d, got, tc.want)
			}
		}
		b.Close()
	}
	_, err := Open(filepath.Join(t.TempDir(), "x.db"), WithDurability("fast"))
	if err == nil || err.Error() != `sqlite: unknown durability 'fast' (want process or full)` {
		t.Fatalf("Open with durability fast: %v", err)
	}
}
