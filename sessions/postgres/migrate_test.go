package postgres

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// schemaObjects counts, in the schema of b, the objects of migrations 2
// and 3: table skein_locks, function skein_notify_events and trigger
// skein_events_notify (both dropped by migration 9), the rows of
// skein_steps named notify, and the rows of skein_migrations.
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

// migrateAll migrates the schema of dsn from n goroutines at once, as
// several `skein migrate` started together would, then opens n backends
// on it, which the test's cleanup closes.
func migrateAll(t *testing.T, dsn string, n int) []*Backend {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = Migrate(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	return openAll(t, dsn, n)
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

// expectNeedsMigration checks that Open refuses the schema of dsn,
// saying to run skein migrate, and leaves it as it was.
func expectNeedsMigration(t *testing.T, dsn string) {
	t.Helper()
	b, err := Open(t.Context(), dsn)
	if err == nil {
		b.Close()
		t.Fatal("Open of a schema that needs migrating succeeded")
	}
	if !errors.Is(err, ErrNeedsMigration) || !strings.Contains(err.Error(), "skein migrate --store URL") {
		t.Fatalf("Open: %v, want ErrNeedsMigration saying to run skein migrate", err)
	}
}

// TestMigrateFresh: Open refuses a new schema (and creates nothing);
// Migrate from several goroutines at once makes every object once (and
// no notification trigger: migration 3 makes it, 9 drops it); notifiers
// change nothing.
func TestMigrateFresh(t *testing.T) {
	dsn := pgtest.DSN(t)
	expectNeedsMigration(t, dsn)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("Open made %d objects (%v)", tables, err)
	}
	conn.Close(context.Background())
	backends := migrateAll(t, dsn, 4)
	want := schemaObjects{locks: 1, step: 1, migrations: SchemaVersion}
	if got := countObjects(t, backends[0]); got != want {
		t.Fatalf("after Migrate: %+v, want %+v", got, want)
	}
	notifyAll(t, backends)
	if got := countObjects(t, backends[0]); got != want {
		t.Fatalf("after the notifiers: %+v, want %+v", got, want)
	}
	if from, err := Migrate(t.Context(), dsn); err != nil || from != SchemaVersion {
		t.Fatalf("Migrate again: from %d, %v", from, err)
	}
}

// notifyTrigger is the trigger a serve replica made at run time before
// migration 3 (step "notify").
const notifyTrigger = `CREATE TRIGGER skein_events_notify AFTER INSERT ON skein_events
	REFERENCING NEW TABLE AS skein_new_events
	FOR EACH STATEMENT EXECUTE FUNCTION skein_notify_events()`

// releasedShared returns what the first serve replica made in a schema
// at version 1, before migration 2 took it over: the same table and
// function as migration 2 (which begins with them), and the trigger of
// step "notify".
func releasedShared(t *testing.T) string {
	shared, _, ok := strings.Cut(migration2, "CREATE TABLE skein_steps")
	if !ok {
		t.Fatal("migration 2 does not make skein_steps")
	}
	return shared + notifyTrigger
}

// TestMigrateFromVersion1 migrates schemas at version 1, one that a
// serve replica used (with the objects it made itself) and one no server
// used, from several goroutines at once: Open refuses both until then;
// both end with step "notify" recorded once and no trigger (migration 9
// drops it).
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
		expectNeedsMigration(t, dsn)
		backends := migrateAll(t, dsn, 3)
		want := schemaObjects{locks: 1, step: 1, migrations: SchemaVersion}
		if got := countObjects(t, backends[0]); got != want {
			t.Fatalf("served %v: after Migrate: %+v, want %+v", served, got, want)
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

// TestMigrateFromVersion2 migrates schemas at version 2, with and
// without the trigger a serve replica made at run time (step "notify"):
// both end with no trigger and no function (migration 9).
func TestMigrateFromVersion2(t *testing.T) {
	for _, served := range []bool{true, false} {
		dsn := pgtest.DSN(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		v2 := migrationsTable + ";" + migrations[0] + ";" + migrations[1] + ";INSERT INTO skein_migrations (version) VALUES (1), (2);"
		if served {
			v2 += notifyTrigger + ";INSERT INTO skein_steps (name) VALUES ('notify');"
		}
		if _, err := conn.Exec(t.Context(), v2); err != nil {
			t.Fatal(err)
		}
		conn.Close(context.Background())
		expectNeedsMigration(t, dsn)
		backends := migrateAll(t, dsn, 2)
		want := schemaObjects{locks: 1, step: 1, migrations: SchemaVersion}
		if got := countObjects(t, backends[0]); got != want {
			t.Fatalf("served %v: after Migrate: %+v, want %+v", served, got, want)
		}
	}
}

// TestMigrateToJSONB upgrades a schema at version 6 holding a session:
// after migration 7 column meta holds its metadata as jsonb, the
// metadata is the same object on load, and the listing's filters find
// the session by repoId, by a metadata condition and by its update time
// (column touched, computed for the rows already stored).
func TestMigrateToJSONB(t *testing.T) {
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	v6 := migrationsTable + ";" + strings.Join(migrations[:6], ";") + ";INSERT INTO skein_migrations (version) VALUES (1), (2), (3), (4), (5), (6);"
	if _, err := conn.Exec(t.Context(), v6); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	updated := created.Add(90*time.Minute + 42*time.Second)
	if _, err := conn.Exec(t.Context(), `INSERT INTO skein_sessions (id, status, created_at, updated_at, metadata, turns, max_turns,
		version, base_from, base_to, own_from, length) VALUES ('old', 'active', $1, $2, $3, 0, 0, 0, 0, 0, 0, 0)`,
		created.UnixNano(), updated.UnixNano(), `{"repoId": "api", "user": "ann", "n": 1.5, "big": 12345678901234}`); err != nil {
		t.Fatal(err)
	}
	expectNeedsMigration(t, dsn)
	if from, err := Migrate(t.Context(), dsn); err != nil || from != 6 {
		t.Fatalf("Migrate = %d, %v", from, err)
	}
	var typ string
	var touched int64
	if err := conn.QueryRow(t.Context(), `SELECT pg_typeof(meta)::text, touched FROM skein_sessions WHERE id = 'old'`).Scan(&typ, &touched); err != nil {
		t.Fatal(err)
	}
	if want := updated.Truncate(time.Minute).UnixNano(); typ != "jsonb" || touched != want {
		t.Fatalf("after migration 7: meta %s, touched %d; want jsonb, %d", typ, touched, want)
	}
	be := openClosed(t, dsn)
	rec, err := be.Load(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"repoId": "api", "user": "ann", "n": 1.5, "big": int64(12345678901234)}; !reflect.DeepEqual(rec.Metadata, want) {
		t.Fatalf("metadata after migration: %#v, want %#v", rec.Metadata, want)
	}
	w, err := sessions.CompileWhere(`metadata.user == "ann"`)
	if err != nil {
		t.Fatal(err)
	}
	conds, _ := w.Conds()
	for _, f := range []sessions.ListFilter{{RepoID: "api"}, {Conds: conds}, {UpdatedAfter: updated}, {UpdatedBefore: updated.Add(time.Nanosecond)}} {
		list, total, err := be.List(t.Context(), f)
		if err != nil || total != 1 || len(list) != 1 || list[0].ID != "old" {
			t.Errorf("List(%+v) after migration: %d of %d, %v", f, len(list), total, err)
		}
	}
	if list, _, err := be.List(t.Context(), sessions.ListFilter{UpdatedAfter: updated.Add(time.Nanosecond)}); err != nil || len(list) != 0 {
		t.Errorf("updated after its update: %d, %v", len(list), err)
	}
	// A write keeps touched the minute of the last update.
	later := updated.Add(3 * time.Minute)
	if err := be.Write(t.Context(), "old", 0, &sessions.Change{UpdatedAt: later}); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), `SELECT touched FROM skein_sessions WHERE id = 'old'`).Scan(&touched); err != nil || touched != later.Truncate(time.Minute).UnixNano() {
		t.Fatalf("touched after a write: %d, %v", touched, err)
	}
}

// TestMetadataNumbersJSONB: metadata numbers come back from the jsonb
// column with their types and values (jsonb keeps a number's digits, so
// a whole float written with its fraction stays a float).
func TestMetadataNumbersJSONB(t *testing.T) {
	be := openClosed(t, pgtest.DSN(t))
	meta := map[string]any{"whole": 2.0, "big": 1e20, "huge": 1e300, "tiny": 1e-300, "tenth": 0.1, "neg": -3.5,
		"max": int64(9223372036854775807), "min": int64(-9223372036854775808), "zero": int64(0),
		"nested": map[string]any{"list": []any{1.0, int64(1), "x", nil, true}}}
	now := time.Now()
	if err := be.Create(t.Context(), &sessions.Record{ID: "n", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	rec, err := be.Load(t.Context(), "n")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.Metadata, meta) {
		t.Fatalf("metadata through jsonb:\n got %#v\nwant %#v", rec.Metadata, meta)
	}
	list, _, err := be.List(t.Context(), sessions.ListFilter{})
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Metadata, meta) {
		t.Fatalf("listed metadata: %v, %v", list, err)
	}
}
