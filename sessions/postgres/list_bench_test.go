package postgres

import (
	"fmt"
	"testing"

	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// BenchmarkList measures a first page of 20 sessions with each filter of
// sessionstest.ListFilters, over 10,000 and 100,000 stored sessions: the
// filtered listings read the matching rows through an index, so they
// stay flat in the number of sessions (the count of all of them does
// not).
func BenchmarkList(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			be := openClosed(b, pgtest.DSN(b))
			sessionstest.FillForList(b, be, n, 16)
			if _, err := be.pool.Exec(b.Context(), "ANALYZE skein_sessions"); err != nil {
				b.Fatal(err)
			}
			sessionstest.BenchList(b, be, n)
		})
	}
}
