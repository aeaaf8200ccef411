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
// 1000 of them, so they stay flat in the number of sessions.
func BenchmarkList(b *testing.B) {
	var backends []sessions.Backend
	for _, n := range sessionstest.ListSizes {
		be := openClosed(b, pgtest.DSN(b))
		sessionstest.FillForList(b, be, n, 16)
		if _, err := be.pool.Exec(b.Context(), "VACUUM ANALYZE skein_sessions"); err != nil {
			b.Fatal(err)
		}
		backends = append(backends, be)
	}
	sessionstest.BenchList(b, backends)
}
