package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// schemaObjects counts, in the schema of b, the objects of migration 2
// and step "notify": table skein_locks, function skein_notify_events,
// trigger skein_events_notify, the rows of skein_steps named notify, and
// the rows of skein_migrations.
type schemaObjects struct{ locks, function, trigger, step, migrations int }

func countObjects(t *testing.T, b *Backend) schemaObjects {
	t.Helper()
	var o schemaObjects
	err := b.pool.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM pg_class WHERE relname = 'skein_locks' AND relnamespace = current_schema()::regnamespace),
		(SELECT count(*) FROM pg_proc WHERE proname = 'skein_notify_events' AND pronamespace = current_schema()::regnamespace),
		(SELECT count(*) FROM pg_trigger WHERE tgname = 'skein_events_notify' AND tgrelid = 'skein_events'::regclass),
		(SELECT count(*) FROM skein_steps WHERE name = 'notify'),
		(SELECT count(*) FROM skein_migrations)`).Scan(&o.locks, &o.function, &o.trigger, &o.step, &o.migrations)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// openAll opens n backends on dsn at once, as processes starting
// together would, and closes them when t ends.
func openAll(t *testing.T, dsn string, n int) []*Backend {
	t.Helper()
	backends := make([]*Backend, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { backends[i], errs[i] = Open(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { backends[i].Close() })
	}
	return backends
}

// notifyAll starts a notifier on every backend at once, as replicas of
// skein serve starting together would, and closes them.
func notifyAll(t *testing.T, backends []*Backend) {
	t.Helper()
	errs := make([]error, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Go(func() {
			n, err := b.NewNotifier()
			if err == nil {
				err = n.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("NewNotifier %d: %v", i, err)
		}
	}
}

// TestMigrateFresh checks that a new schema, opened by several backends
// at once, gets the locks table and the notify function exactly once and
// no trigger, and that notifiers started at once on several backends
// apply step "notify" once: one trigger, one record of it.
func TestMigrateFresh(t *testing.T) {
	dsn := pgtest.DSN(t)
	backends := openAll(t, dsn, 4)
	want := schemaObjects{locks: 1, function: 1, migrations: SchemaVersion}
	if got := countObjects(t, backends[0]); got != want {
		t.Fatalf("after Open: %+v, want %+v", got, want)
	}
	notifyAll(t, backends)
	want.trigger, want.step = 1, 1
	if got := countObjects(t, backends[0]); got != want {
		t.Fatalf("after the notifiers: %+v, want %+v", got, want)
	}
	notifyAll(t, openAll(t, dsn, 2))
	if got := countObjects(t, backends[0]); got != want {
		t.Fatalf("after opening again: %+v, want %+v", got, want)
	}
}

// releasedShared returns what the first serve replica made in a schema
// at version 1, before migration 2 took it over: the same table and
// function as migration 2 (which begins with them), and the trigger of
// step "notify".
func releasedShared(t *testing.T) string {
	shared, _, ok := strings.Cut(migration2, "CREATE TABLE skein_steps")
	if !ok {
		t.Fatal("migration 2 does not make skein_steps")
	}
	return shared + steps["notify"]
}

// TestMigrateFromVersion1 migrates schemas at version 1, one that a
// serve replica used (with the objects it made itself) and one no server
// used, from several backends at once: both get migration 2 once, the
// first keeps its trigger and records it as step "notify" (so a notifier
// does not make it again), the second has no trigger until a notifier
// applies the step.
func TestMigrateFromVersion1(t *testing.T) {
	for _, served := range []bool{true, false} {
		dsn := pgtest.DSN(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		v1 := migrationsTable + ";" + migrations[0] + ";INSERT INTO skein_migrations (version) VALUES (1);"
		if served {
			v1 += releasedShared(t)
		}
		if _, err := conn.Exec(t.Context(), v1); err != nil {
			t.Fatal(err)
		}
		conn.Close(context.Background())
		backends := openAll(t, dsn, 3)
		want := schemaObjects{locks: 1, function: 1, migrations: SchemaVersion}
		if served {
			want.trigger, want.step = 1, 1
		}
		if got := countObjects(t, backends[0]); got != want {
			t.Fatalf("served %v: after Open: %+v, want %+v", served, got, want)
		}
		notifyAll(t, backends)
		want.trigger, want.step = 1, 1
		if got := countObjects(t, backends[0]); got != want {
			t.Fatalf("served %v: after the notifiers: %+v, want %+v", served, got, want)
		}
		l := newTestLocker(t, backends[1])
		lk, err := l.TryLock(t.Context(), "turn:s")
		if err != nil {
			t.Fatalf("served %v: TryLock: %v", served, err)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
