package sqlite

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// TestMigratePayloadChecksums opens a database of schema version 11 (the
// one before payload checksums) holding a session with a title, summary,
// first prompt, metadata, a message and an event with data, and checks
// that migration 12 keeps them readable (marked unchecked, -1), that new
// writes store checksums that loads verify, and that a store key seals
// what is written after it is given while the old values still read.
func TestMigratePayloadChecksums(t *testing.T) {
	path := t.TempDir() + "/v11.db"
	db := rawDB(t, path)
	ctx := t.Context()
	if _, err := db.Exec("PRAGMA journal_mode = WAL"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := range 11 {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
		if step := migrationStep(v + 1); step != nil {
			if err := step(ctx, tx, nil); err != nil {
				t.Fatalf("migration %d: %v", v+1, err)
			}
		}
	}
	body := `{"role":"user","content":"old message"}`
	sum := int64(sessions.Checksum([]byte(body)))
	msgs := appendMessage(nil, body, &sum)
	data := `{"note":"old event"}`
	evs, err := encodeEvents(nil, 1, []rowstore.EventRow{{Seq: 1, Type: sessions.EventStatus, Time: 5, Data: &data}})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := writeKey(1, createdBase)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{fmt.Sprintf("PRAGMA user_version = 11; PRAGMA application_id = %d", applicationID), nil},
		{`INSERT INTO sessions (sid, id, status, created_at, summary, metadata, max_turns, title, first_prompt)
			VALUES (1, 'old', 'active', 1, 'old summary', '{"repoId":"r1","note":"old"}', 0, 'old title', 'old message')`, nil},
		{`INSERT INTO writes (key, version, length, base_from, base_to, own_from, turns, updated_at, pos, pos_end, seq, seq_end, messages, events)
			VALUES (?, 0, 1, 0, 0, 0, 0, 2, 0, 1, 1, 2, ?, ?)`, []any{key, msgs, evs}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	b := migrated(t, path, 11)
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
	var titleSum, summarySum sql.NullInt64
	if err := db.QueryRow(`SELECT title_crc, summary_crc FROM sessions WHERE id = 'old'`).Scan(&titleSum, &summarySum); err != nil ||
		titleSum.Int64 != rowstore.LegacySum || summarySum.Int64 != rowstore.LegacySum {
		t.Fatalf("migrated checksums: title %v, summary %v (%v), want %d", titleSum, summarySum, err, rowstore.LegacySum)
	}
	if err := b.Write(ctx, "old", 0, &sessions.Change{SetTitle: true, Title: "new title", UpdatedAt: time.Unix(3, 0),
		Events: []sessions.Event{{Seq: 2, Type: sessions.EventStatus, Time: time.Unix(3, 0), Data: map[string]any{"n": int64(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT title_crc FROM sessions WHERE id = 'old'`).Scan(&titleSum); err != nil ||
		titleSum.Int64 != int64(sessions.Checksum([]byte("new title"))) {
		t.Fatalf("title_crc after a write: %v, %v", titleSum, err)
	}
	check(b, "new title")
	b.Close()

	sealed, err := Open(path, WithKey(newTestKey(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	if err := sealed.Write(ctx, "old", 1, &sessions.Change{SetTitle: true, Title: "sealed title", UpdatedAt: time.Unix(4, 0)}); err != nil {
		t.Fatal(err)
	}
	check(sealed, "sealed title")
	var stored string
	if err := db.QueryRow(`SELECT title FROM sessions WHERE id = 'old'`).Scan(&stored); err != nil || stored == "sealed title" {
		t.Fatalf("the title written with a key is stored as %q (%v)", stored, err)
	}
}
