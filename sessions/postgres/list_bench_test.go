package postgres

import (
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

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
// dropped by TestMain; with SKEIN_LIST_FIXTURES set
// (sessionstest.FixturesEnv) they are stored once in schemas
// skein_listbench_<n> and kept, and later runs migrate and reuse them
// (DROP SCHEMA removes them).
func BenchmarkList(b *testing.B) {
	pgtest.Skip(b)
	if listBench.backends == nil {
		for _, n := range sessionstest.ListSizes {
			dsn, err := listSchema(b, n)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Migrate(b.Context(), dsn); err != nil {
				b.Fatal(err)
			}
			be, err := Open(b.Context(), dsn)
			if err != nil {
				b.Fatal(err)
			}
			listBench.cleanup = append(listBench.cleanup, func() { be.Close() })
			if !sessionstest.FilledForList(b, be, n) {
				sessionstest.FillForList(b, be, n, 16)
			}
			if _, err := be.pool.Exec(b.Context(), "VACUUM ANALYZE skein_sessions"); err != nil {
				b.Fatal(err)
			}
			listBench.backends = append(listBench.backends, be)
		}
	}
	sessionstest.BenchList(b, listBench.backends)
}

// listSchema returns the DSN of BenchmarkList's schema for n sessions: a
// new one dropped by TestMain, or with sessionstest.FixturesEnv set,
// schema skein_listbench_<n>, made unless it exists and kept.
func listSchema(b *testing.B, n int) (string, error) {
	if os.Getenv(sessionstest.FixturesEnv) == "" {
		dsn, drop, err := pgtest.NewSchema()
		if err == nil {
			listBench.cleanup = append(listBench.cleanup, func() { drop() })
		}
		return dsn, err
	}
	schema := fmt.Sprint("skein_listbench_", n)
	conn, err := pgx.Connect(b.Context(), os.Getenv(pgtest.Env))
	if err != nil {
		return "", err
	}
	defer conn.Close(b.Context())
	if _, err := conn.Exec(b.Context(), "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return "", err
	}
	return pgtest.WithSchema(os.Getenv(pgtest.Env), schema)
}

// listBench holds BenchmarkList's backends for the process, and what
// TestMain calls to drop them, last first.
var listBench struct {
	backends []sessions.Backend
	cleanup  []func()
}
