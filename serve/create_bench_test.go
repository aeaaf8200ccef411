package serve_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// BenchmarkCreateAmongActive creates sessions (POST /api/sessions) on a
// server over SQLite that already has 100 or 5,000 active served
// sessions: a creation counts them against --max-sessions, and should
// cost the same whatever their number (ns/op of the two sizes side by
// side).
func BenchmarkCreateAmongActive(b *testing.B) {
	for _, active := range []int{100, 5000} {
		b.Run("active="+strconv.Itoa(active), func(b *testing.B) {
			be, err := sqlite.Open(filepath.Join(b.TempDir(), "sessions.db"))
			if err != nil {
				b.Fatal(err)
			}
			store, err := sessions.NewStore(be)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			for i := range active {
				if err := store.Create(b.Context(), "active-"+strconv.Itoa(i), sessions.Info{Metadata: map[string]any{"agent": "echo"}}); err != nil {
					b.Fatal(err)
				}
			}
			_, hs := starlarkServer(b, store, loadAgent, active+1_000_000)
			b.ResetTimer()
			for b.Loop() {
				call(b, hs, "POST", "/api/sessions", nil, 201)
			}
		})
	}
}
