// Package pgtest gives tests a PostgreSQL schema of their own in the test
// database that the SKEIN_TEST_POSTGRES environment variable names (a
// postgres:// URL; `bash .ci/postgres` starts a local server and prints
// one). Without the variable the tests that ask for one skip, with one
// line saying so.
//
// Every schema is new, named skein_t_<unix time>_<random>, and dropped
// when the test that made it ends, so parallel test binaries (and several
// people's runs on one server) never see each other's sessions. Schemas
// that a killed test binary left behind are dropped by the next run once
// they are an hour old.
//
// A test that stops and restarts the database starts a throw-away server
// of its own instead (NewServer), never the shared one.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the environment variable that holds the test database's URL.
const Env = "SKEIN_TEST_POSTGRES"

// prefix starts the name of every schema this package makes.
const prefix = "skein_t_"

// staleAfter is the age after which a left-over schema is dropped.
const staleAfter = time.Hour

// Available reports whether Env is set.
func Available() bool { return os.Getenv(Env) != "" }

// Skip skips t, with one line that says why, when Env is not set.
func Skip(t testing.TB) {
	t.Helper()
	if !Available() {
		t.Skipf("%s is not set: PostgreSQL tests skipped (export %s=\"$(bash .ci/postgres)\" runs them)", Env, Env)
	}
}

var (
	keyed sync.Map // key -> DSN, for Keyed
	swept sync.Once
)

// DSN returns the URL of a new, empty schema in the test database, which
// is dropped when t ends. It skips t when Env is not set, and fails it
// when the database cannot be reached.
func DSN(t testing.TB) string {
	t.Helper()
	Skip(t)
	dsn, drop, err := NewSchema()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// NewSchema makes a new, empty schema in the test database and returns
// its URL and the function that drops it: DSN for callers that are not a
// testing.TB (a testscript's setup). Env must be set.
func NewSchema() (dsn string, drop func() error, err error) {
	base := os.Getenv(Env)
	if base == "" {
		return "", nil, fmt.Errorf("%s is not set", Env)
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", nil, err
	}
	schema := fmt.Sprintf("%s%d_%s", prefix, time.Now().Unix(), hex.EncodeToString(suffix[:]))
	err = admin(base, func(ctx context.Context, conn *pgx.Conn) error {
		swept.Do(func() { sweep(ctx, conn); trigrams(ctx, conn) })
		_, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		return err
	})
	if err != nil {
		return "", nil, err
	}
	drop = func() error {
		return admin(base, func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			return err
		})
	}
	if dsn, err = WithSchema(base, schema); err != nil {
		drop()
		return "", nil, err
	}
	return dsn, drop, nil
}

// Keyed is DSN for a schema named by key: every call with the same key in
// this process returns the same DSN (the first call's test owns the
// schema and drops it when it ends).
func Keyed(t testing.TB, key string) string {
	t.Helper()
	Skip(t)
	if dsn, ok := keyed.Load(key); ok {
		return dsn.(string)
	}
	dsn := DSN(t)
	actual, _ := keyed.LoadOrStore(key, dsn)
	t.Cleanup(func() { keyed.CompareAndDelete(key, dsn) })
	return actual.(string)
}

// WithSchema returns dsn with search_path set to schema, and
// synchronous_commit off: a commit returns before it is on the server's
// disk, which changes nothing a test can see while the server runs (a
// killed skein loses no commit either way) and makes each commit cost
// microseconds instead of an fsync. Benchmarks of durable writes set it
// back on (postgres.WithDurability(sessions.DurabilityFull)).
func WithSchema(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL", Env)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// admin runs fn on a connection of its own to the test database.
func admin(dsn string, fn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("the database of %s: %w", Env, err)
	}
	defer conn.Close(ctx)
	if err := fn(ctx, conn); err != nil {
		return fmt.Errorf("the database of %s: %w", Env, err)
	}
	return nil
}

// trigrams creates extension pg_trgm in schema public unless the
// database has it (its owner may: a trusted extension), so that skein
// migrate's trigram index (package postgres, textIndex) uses it there
// instead of creating it in a test's schema: dropping that schema
// (CASCADE) would drop the extension with every other schema's index
// on it. Without the privilege or the extension, migrate creates it or
// does without, as it would in production.
func trigrams(ctx context.Context, conn *pgx.Conn) {
	conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
}

// sweep drops the schemas of this package older than staleAfter: those
// of test binaries that were killed before their cleanup ran.
func sweep(ctx context.Context, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, prefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		stamp, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "_")
		sec, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)) < staleAfter {
			continue
		}
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	}
}
