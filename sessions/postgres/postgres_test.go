package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore/rowstoretest"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// openTest migrates the schema of dsn and opens a backend on it. It
// does not close it: the suite does, or the caller.
func openTest(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	if _, err := Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	b, err := Open(t.Context(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

// openClosed opens a backend that the test's cleanup closes.
func openClosed(t testing.TB, dsn string, opts ...Option) *Backend {
	t.Helper()
	b := openTest(t, dsn, opts...)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestBackend(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend { return openTest(t, pgtest.DSN(t)) })
}

func TestDurable(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunDurableTests(t, func(t *testing.T, path string) sessions.Backend { return openTest(t, pgtest.Keyed(t, path)) })
}

// openTarget migrates and opens the database dsn names, for the
// multi-process tests.
func openTarget(dsn string) (sessions.Backend, error) {
	if _, err := Migrate(context.Background(), dsn); err != nil {
		return nil, err
	}
	return Open(context.Background(), dsn)
}

func TestMain(m *testing.M) {
	sessionstest.ProcessHelper(openTarget)
	code := m.Run()
	for _, f := range slices.Backward(listBench.cleanup) {
		f()
	}
	os.Exit(code)
}

func TestProcesses(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunProcessTests(t, func(t *testing.T) string { return pgtest.DSN(t) }, openTarget)
}

// raw reaches a backend's tables through its pool.
type raw struct{ b *Backend }

func (r raw) Table(kind string) string { return "skein_" + kind }

func (r raw) Exec(query string) error {
	_, err := r.b.pool.Exec(context.Background(), query)
	return err
}

func (r raw) Count(kind string) (n int, err error) {
	err = r.b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+r.Table(kind)).Scan(&n)
	return n, err
}

func (r raw) Damage(id string, pos int64, body string) error {
	_, err := r.b.pool.Exec(context.Background(), `UPDATE skein_messages SET body = $3
		WHERE sid = (SELECT sid FROM skein_sessions WHERE id = $1) AND pos = $2`, id, pos, body)
	return err
}

func TestRows(t *testing.T) {
	pgtest.Skip(t)
	rowstoretest.Run(t, func(t *testing.T) (sessions.Backend, rowstoretest.Raw) {
		b := openTest(t, pgtest.DSN(t))
		return b, raw{b}
	})
}

// TestChecksums changes a message's stored text with an UPDATE that
// bypasses the backend and expects the load to fail naming the session
// and the message.
func TestChecksums(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunChecksumTests(t, func(t *testing.T, path string) sessions.Backend {
		return openTest(t, pgtest.Keyed(t, path))
	}, func(t *testing.T, path, marker string) {
		b := openClosed(t, pgtest.Keyed(t, path))
		altered := marker[:len(marker)-1] + string(marker[len(marker)-1]^0x01)
		tag, err := b.pool.Exec(t.Context(), `UPDATE skein_messages SET body = replace(body, $1, $2) WHERE strpos(body, $1) > 0`, marker, altered)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("damaging the row of %q: %d rows, %v", marker, tag.RowsAffected(), err)
		}
	})
}

// TestFieldChecksums changes each payload besides message bodies (title,
// summary, metadata, first prompt, event data) with an UPDATE that
// bypasses the backend and expects loads to fail naming the session and
// the field.
func TestFieldChecksums(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunFieldChecksumTests(t, func(t *testing.T, path string) sessions.Backend {
		return openTest(t, pgtest.Keyed(t, path))
	}, func(t *testing.T, path, marker string) {
		b := openClosed(t, pgtest.Keyed(t, path))
		altered := marker[:len(marker)-1] + string(marker[len(marker)-1]^0x01)
		n := int64(0)
		for _, col := range []string{"skein_sessions.title", "skein_sessions.summary", "skein_sessions.metadata", "skein_sessions.first_prompt", "skein_events.data"} {
			table, column, _ := strings.Cut(col, ".")
			tag, err := b.pool.Exec(t.Context(), fmt.Sprintf(`UPDATE %s SET %s = replace(%[2]s, $1, $2) WHERE strpos(%[2]s, $1) > 0`, table, column), marker, altered)
			if err != nil {
				t.Fatalf("damaging %s: %v", col, err)
			}
			n += tag.RowsAffected()
		}
		if n != 1 {
			t.Fatalf("damaging %q changed %d rows, want 1", marker, n)
		}
	})
}
