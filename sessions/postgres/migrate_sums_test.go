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

// TestMigratePayloadChecksums migrates a schema at version 5 (the one
// before payload checksums) holding a session with a title, summary,
// first prompt, metadata, a message and an event with data, and checks
// that migration 6 keeps them readable (marked unchecked), that new
// writes store checksums, and that a store key seals what is written
// after it is given while the old values still read.
func TestMigratePayloadChecksums(t *testing.T) {
	pgtest.Skip(t)
	dsn := pgtest.DSN(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"role":"user","content":"old message"}`
	v5 := migrationsTable + ";" + strings.Join(migrations[:5], ";") + ";INSERT INTO skein_migrations (version) VALUES (1), (2), (3), (4), (5);" +
		`INSERT INTO skein_sessions (id, status, created_at, updated_at, summary, metadata, turns, max_turns, version, base_from, base_to, own_from, length, title, first_prompt)
			VALUES ('old', 'active', 1, 2, 'old summary', '{"repoId":"r1","note":"old"}', 0, 0, 0, 0, 0, 0, 1, 'old title', 'old message');` +
		fmt.Sprintf(`INSERT INTO skein_messages (sid, pos, body, crc) SELECT sid, 0, '%s', %d FROM skein_sessions;`, body, sessions.Checksum([]byte(body))) +
		`INSERT INTO skein_events (sid, seq, type, time, data) SELECT sid, 1, 'status', 5, '{"note":"old event"}' FROM skein_sessions;`
	if _, err := conn.Exec(ctx, v5); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	expectNeedsMigration(t, dsn)
	b := migrateAll(t, dsn, 1)[0]
	check := func(b sessions.Backend, title string) {
		t.Helper()
		rec, err := b.Load(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Title != title || rec.Summary == nil || *rec.Summary != "old summary" || rec.FirstPrompt != "old message" ||
			rec.Metadata["note"] != "old" || len(rec.Messages) != 1 || rec.Messages[0].Text != "old message" ||
			len(rec.Events) < 1 || rec.Events[0].Data["note"] != "old event" {
			t.Fatalf("after migrating: %+v", rec)
		}
		list, _, err := b.List(ctx, sessions.ListFilter{RepoID: "r1"})
		if err != nil || len(list) != 1 || list[0].Title != title {
			t.Fatalf("List by repo after migrating: %+v, %v", list, err)
		}
	}
	check(b, "old title")
	var titleSum, summarySum *int64
	if err := b.pool.QueryRow(ctx, `SELECT title_crc, summary_crc FROM skein_sessions WHERE id = 'old'`).Scan(&titleSum, &summarySum); err != nil ||
		titleSum == nil || *titleSum != rowstore.LegacySum || summarySum == nil || *summarySum != rowstore.LegacySum {
		t.Fatalf("migrated checksums: %v, %v (%v), want %d", titleSum, summarySum, err, rowstore.LegacySum)
	}
	if err := b.Write(ctx, "old", 0, &sessions.Change{SetTitle: true, Title: "new title", UpdatedAt: time.Unix(3, 0),
		Events: []sessions.Event{{Seq: 2, Type: sessions.EventStatus, Time: time.Unix(3, 0), Data: map[string]any{"n": int64(1)}}}}); err != nil {
		t.Fatal(err)
	}
	var eventSum *int64
	if err := b.pool.QueryRow(ctx, `SELECT s.title_crc, e.crc FROM skein_sessions s JOIN skein_events e ON e.sid = s.sid AND e.seq = 2`).Scan(&titleSum, &eventSum); err != nil ||
		titleSum == nil || *titleSum != int64(sessions.Checksum([]byte("new title"))) || eventSum == nil {
		t.Fatalf("checksums after a write: title %v, event %v, %v", titleSum, eventSum, err)
	}
	check(b, "new title")

	sealed := openClosed(t, dsn, WithKey(sessionstest.NewKey(t)))
	if err := sealed.Write(ctx, "old", 1, &sessions.Change{SetTitle: true, Title: "sealed title", UpdatedAt: time.Unix(4, 0)}); err != nil {
		t.Fatal(err)
	}
	check(sealed, "sealed title")
	var stored string
	if err := b.pool.QueryRow(ctx, `SELECT title FROM skein_sessions WHERE id = 'old'`).Scan(&stored); err != nil || stored == "sealed title" {
		t.Fatalf("the title written with a key is stored as %q (%v)", stored, err)
	}
}
