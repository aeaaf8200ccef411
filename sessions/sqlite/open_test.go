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
