package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// TestMigrateLabels upgrades a schema of version 7 that holds a sealed
// session and a plain one: migration 8 refuses without the store's key
// (and changes nothing), then with it fills repo_id and agent of both
// (the sealed one's from its opened metadata). The trigram index is
// left out, with a notice, while the extension cannot be had (a name no
// server has), and a later migrate adds it; the listings by repository,
// agent and text find the sessions either way.
func TestMigrateLabels(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	v7 := migrationsTable + ";" + strings.Join(migrations[:7], ";") + ";INSERT INTO skein_migrations (version) SELECT generate_series(1, 7);"
	if _, err := conn.Exec(ctx, v7); err != nil {
		t.Fatal(err)
	}
	key := sessionstest.NewKey(t)
	at := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	for i, rec := range []*sessions.Record{
		{ID: "sealed", Title: "Sealed work", Metadata: map[string]any{"repoId": "r1", "agent": "a1"}},
		{ID: "plain", Title: "Plain work", Metadata: map[string]any{"repoId": "r2", "agent": "a1"}},
	} {
		rec.Status, rec.CreatedAt, rec.UpdatedAt = sessions.StatusActive, at.Add(time.Duration(i)*time.Minute), at
		k := key
		if rec.ID == "plain" {
			k = nil
		}
		row, err := rowstore.EncodeSession(k, rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO skein_sessions (id, status, created_at, updated_at, metadata, metadata_crc, title, title_crc,
			turns, max_turns, version, base_from, base_to, own_from, length) VALUES ($1, 'active', $2, $3, $4, $5, $6, $7, 0, 0, 0, 0, 0, 0, 0)`,
			rec.ID, row.Created, row.Updated, row.Metadata.Text, row.Metadata.Sum, row.Title.Text, row.Title.Sum); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Migrate(ctx, dsn); err == nil || !strings.Contains(err.Error(), "sealed metadata (the first: 'sealed')") ||
		!strings.Contains(err.Error(), "--encryption-key-file") {
		t.Fatalf("Migrate without the key: %v, want an error saying to give the key", err)
	}
	expectNeedsMigration(t, dsn)

	textIndexed := func() bool {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'skein_sessions_by_text'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		var step bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skein_steps WHERE name = 'trgm')`).Scan(&step); err != nil {
			t.Fatal(err)
		}
		if step != (n == 1) {
			t.Fatalf("index %d, step trgm recorded %v", n, step)
		}
		return step
	}
	var notices []string
	trgmExtension = "skein_no_such_extension"
	from, err := Migrate(ctx, dsn, WithKey(key), WithNotice(func(s string) { notices = append(notices, s) }))
	trgmExtension = "pg_trgm"
	if err != nil || from != 7 {
		t.Fatalf("Migrate with the key: from %d, %v", from, err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "no trigram index for the text search of listings (q)") ||
		!strings.Contains(notices[0], "skein_no_such_extension") || !strings.Contains(notices[0], "run skein migrate again") || textIndexed() {
		t.Fatalf("notices %q, want one about the trigram index, and no index", notices)
	}
	b, err := Open(ctx, dsn, WithKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check := func() {
		t.Helper()
		for f, want := range map[*sessions.ListFilter]string{
			{RepoID: "r1"}:                "[sealed]",
			{Agent: "a1"}:                 "[plain sealed]",
			{Agent: "a1", Limit: 1}:       "[plain]",
			{Text: "WORK"}:                "[plain sealed]",
			{RepoID: "r2", Text: "plain"}: "[plain]",
		} {
			list, _, err := b.List(ctx, *f)
			var ids []string
			for _, s := range list {
				ids = append(ids, s.ID)
			}
			if got := fmt.Sprint(ids); err != nil || got != want {
				t.Errorf("List(%+v) = %s, %v; want %s", *f, got, err, want)
			}
		}
	}
	check()
	var labels string
	if err := conn.QueryRow(ctx, `SELECT string_agg(id || ' ' || coalesce(repo_id, '-') || ' ' || coalesce(agent, '-'), ', ' ORDER BY id) FROM skein_sessions`).Scan(&labels); err != nil {
		t.Fatal(err)
	}
	if want := "plain r2 a1, sealed r1 a1"; labels != want {
		t.Errorf("labels %q, want %q", labels, want)
	}

	notices = nil
	if from, err := Migrate(ctx, dsn, WithNotice(func(s string) { notices = append(notices, s) })); err != nil || from != SchemaVersion || len(notices) > 0 {
		t.Fatalf("Migrate again: from %d, %v, notices %q", from, err, notices)
	}
	if !textIndexed() {
		t.Fatal("the second migrate made no trigram index")
	}
	var plan string
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `EXPLAIN SELECT id FROM skein_sessions WHERE lower(`+rowstore.LabelSQL+`) LIKE '%work%'`)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan = strings.Join(lines, "\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "skein_sessions_by_text") {
		t.Errorf("the text search does not use the trigram index:\n%s", plan)
	}
	check()
}
