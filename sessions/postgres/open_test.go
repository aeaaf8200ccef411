package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// TestOpenConcurrently migrates a new schema and opens it from several
// backends at once, as processes starting together would: it is migrated
// once and every backend works.
func TestOpenConcurrently(t *testing.T) {
	const n = 6
	backends := migrateAll(t, pgtest.DSN(t), n)
	ctx := t.Context()
	now := time.Now()
	for i, b := range backends {
		if err := b.Create(ctx, &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range backends {
		if _, total, err := b.List(ctx, sessions.ListFilter{}); err != nil || total != n {
			t.Fatalf("List: %d sessions, %v; want %d", total, err, n)
		}
	}
	var applied, latest int
	if err := backends[0].pool.QueryRow(ctx, `SELECT count(*), max(version) FROM skein_migrations`).Scan(&applied, &latest); err != nil {
		t.Fatal(err)
	}
	if applied != SchemaVersion || latest != SchemaVersion {
		t.Fatalf("skein_migrations: %d rows up to version %d, want %d rows up to %d", applied, latest, SchemaVersion, SchemaVersion)
	}
}

func TestMigrationsMatchSchemaVersion(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d migrations, SchemaVersion %d", len(migrations), SchemaVersion)
	}
}

// withQuery returns dsn with its query parameter key set to value.
func withQuery(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestOpenRefuses checks that Open refuses a schema that does not exist,
// one migrated by a newer skein, and what is not a postgres:// URL, with
// errors that say so.
func TestOpenRefuses(t *testing.T) {
	dsn := pgtest.DSN(t)
	b := openTest(t, dsn)
	if _, err := b.pool.Exec(t.Context(), `INSERT INTO skein_migrations (version) VALUES ($1)`, SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, tc := range []struct{ dsn, want string }{
		{dsn, fmt.Sprintf("newer than this skein supports (%d)", SchemaVersion)},
		{withQuery(t, dsn, "search_path", "skein_no_such_schema"), "no schema of the search_path (skein_no_such_schema) exists"},
		{"mysql://u:secret@localhost/db", "must be a postgres:// URL"},
		{"postgres://u:secret@localhost:5432/db?sslmode=bogus", "sslmode"},
	} {
		_, err := Open(t.Context(), tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want an error containing %q", Redact(tc.dsn), err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%s): the error shows the password: %v", Redact(tc.dsn), err)
		}
	}
}

// TestOpenWrongPassword checks that a failed login names the database
// without its password.
func TestOpenWrongPassword(t *testing.T) {
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "not-the-password-4711"
	u.User = url.UserPassword(u.User.Username(), wrong)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = Open(ctx, u.String())
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), ":xxxxx@") {
		t.Fatalf("error %q: want the DSN shown with its password as xxxxx", err)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:secret@db.example:5432/skein?sslmode=require", "postgres://u:xxxxx@db.example:5432/skein?sslmode=require"},
		{"postgresql://u@db/skein", "postgresql://u@db/skein"},
		{"postgres://db/skein?user=u&password=secret", "postgres://db/skein?password=xxxxx&user=u"},
		{"postgres://u:p%40ss%20w@db/skein", "postgres://u:xxxxx@db/skein"},
		{"postgres://u:secret@db:port/skein", "postgres://(unparsable database URL)"},
		{"secret", "(unparsable database URL)"},
		{"host=db password=secret", "(unparsable database URL)"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDurability checks that DurabilityFull turns synchronous_commit on
// for the backend's connections (the test DSN turns it off) and that the
// default keeps what the DSN or server says.
func TestDurability(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{nil, "off"},
		{[]Option{WithDurability(sessions.DurabilityProcess)}, "off"},
		{[]Option{WithDurability(sessions.DurabilityFull)}, "on"},
	} {
		b := openClosed(t, dsn, tc.opts...)
		var got string
		if err := b.pool.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("durability %v: synchronous_commit %s, want %s", tc.opts, got, tc.want)
		}
	}
	if _, err := Open(t.Context(), dsn, WithDurability("bogus")); err == nil || !strings.Contains(err.Error(), "unknown durability") {
		t.Errorf("Open with durability bogus: %v", err)
	}
}
