package postgres

import (
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// BenchmarkList measures a first page of 20 sessions with each filter of
// sessionstest.ListFilters over 10,000 and over 100,000 stored sessions
// (each in a schema of its own), side by side (sessionstest.BenchList):
// the listings read the matching rows through indexes and count at most
// 1000 of them, so they stay flat in the number of sessions. The
// sessions are stored once per process (a -count run reuses them) and
// dropped by TestMain.
func BenchmarkList(b *testing.B) {
	pgtest.Skip(b)
	if listBench.backends == nil {
		for _, n := range sessionstest.ListSizes {
			dsn, drop, err := pgtest.NewSchema()
			if err != nil {
				b.Fatal(err)
			}
			listBench.cleanup = append(listBench.cleanup, func() { drop() })
			if _, err := Migrate(b.Context(), dsn); err != nil {
				b.Fatal(err)
			}
			be, err := Open(b.Context(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			listBench.cleanup = append(listBench.cleanup, func() { be.Close() })
			sessionstest.FillForList(b, be, n, 16)
			if _, err := be.pool.Exec(b.Context(), "VACUUM ANALYZE skein_sessions"); err != nil {
				b.Fatal(err)
			}
			listBench.backends = append(listBench.backends, be)
		}
	}
	sessionstest.BenchList(b, listBench.backends)
}

// listBench holds BenchmarkList's backends for the process, and what
// TestMain calls to drop them, last first.
var listBench struct {
	backends []sessions.Backend
	cleanup  []func()
}
