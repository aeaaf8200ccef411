package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// durableStore is a new, empty durable store for a multi-process test:
// target is its --store value, open opens it in the test's process.
type durableStore struct {
	target string
	open   func() (sessions.Backend, error)
}

// forEachDurableStore runs fn as a subtest on each kind of durable store,
// "sqlite" and "postgres" (skipped, saying so, when SKEIN_TEST_POSTGRES is
// not set); newStore makes a new, empty store of that kind for t: a file
// in a temporary directory, a schema of the test database.
func forEachDurableStore(t *testing.T, fn func(t *testing.T, newStore func(t *testing.T) durableStore)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, func(t *testing.T) durableStore {
			db := filepath.Join(t.TempDir(), "sessions.db")
			return durableStore{target: db, open: func() (sessions.Backend, error) { return sqlite.Open(db) }}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		pgtest.Skip(t)
		fn(t, func(t *testing.T) durableStore {
			dsn := pgtest.DSN(t)
			if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
				t.Fatal(err)
			}
			return durableStore{target: dsn, open: func() (sessions.Backend, error) { return postgres.Open(context.Background(), dsn) }}
		})
	})
}
