package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// TestMigrateFromVersion1 opens a database of schema version 1, as the
// first release wrote it, and checks that it is migrated in place with
// its sessions intact: the events of version 1 record no message rows,
// new writes do, and titles (version 3) can be set.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db := rawDB(t, path)
	for _, q := range []string{
		"PRAGMA journal_mode = WAL",
		migrations[0],
		fmt.Sprintf("PRAGMA user_version = 1; PRAGMA application_id = %d", applicationID),
		`INSERT INTO sessions (id, status, created_at, updated_at, turns, max_turns, version, base_from, base_to, own_from, length)
			VALUES ('old', 'completed', 1, 2, 1, 0, 1, 0, 0, 0, 1)`,
		`INSERT INTO messages (sid, pos, body) VALUES (1, 0, '{"role":"user","content":"from v1"}')`,
		`INSERT INTO events (sid, seq, type, time, data) VALUES (1, 1, 'message', 2, '{"index":0,"role":"user"}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b := openClosed(t, path)
	if v := pragma[int](t, db, "user_version"); v != SchemaVersion {
		t.Fatalf("user_version after migrating %d, want %d", v, SchemaVersion)
	}
	// Version 5: messages and events are WITHOUT ROWID, and the index on
	// updated_at is gone.
	for _, table := range []string{"messages", "events"} {
		var ddl string
		if err := db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = ?`, table).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(ddl, "WITHOUT ROWID") {
			t.Errorf("%s after migrating: %s", table, ddl)
		}
	}
	var indexes int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'sessions_by_updated'`).Scan(&indexes); err != nil || indexes != 0 {
		t.Errorf("sessions_by_updated after migrating: %d, %v", indexes, err)
	}
	ctx := t.Context()
	rec, err := b.Load(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Messages) != 1 || rec.Messages[0].Text != "from v1" || len(rec.Events) != 1 || rec.Status != sessions.StatusCompleted ||
		rec.Title != "" || rec.FirstPrompt != "" {
		t.Fatalf("migrated session: %+v", rec)
	}
	if got, err := b.LoadAppended(ctx, "old"); err != nil || len(got) != 0 {
		t.Fatalf("LoadAppended of a version 1 session = %v, %v; want nothing", got, err)
	}
	m := sessions.Message{Role: sessions.RoleUser, Text: "from v2"}
	err = b.Write(ctx, "old", rec.Version, &sessions.Change{Append: []sessions.Message{m}, SetTitle: true, Title: "titled in v3",
		SetFirstPrompt: true, FirstPrompt: "from v1",
		Events: []sessions.Event{{Seq: 2, Type: sessions.EventMessage, Time: time.Now(), Data: map[string]any{"index": int64(1), "role": "user"}}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadAppended(ctx, "old")
	if err != nil || len(got) != 1 || got[2].Text != "from v2" {
		t.Fatalf("LoadAppended after a write = %v, %v; want event 2's message", got, err)
	}
	// run records (version 4) can be written
	run := &sessions.RunRecord{ID: "run", Workflow: "w", Fingerprint: "f", Status: "running", CreatedAt: time.Now(), UpdatedAt: time.Now(), Head: []byte("{}")}
	if err := b.CreateRun(ctx, run); err != nil {
		t.Fatalf("CreateRun after migrating: %v", err)
	}
	b.Close()
	// Reopening the migrated file changes nothing.
	b = openClosed(t, path)
	if rec, err := b.Load(ctx, "old"); err != nil || len(rec.Messages) != 2 || rec.Title != "titled in v3" || rec.FirstPrompt != "from v1" {
		t.Fatalf("after reopening: %v, %v", rec, err)
	}
}

// TestMigrateMessageIDs opens a database of schema version 6, whose
// message rows have no ids, and checks that migration 8 gives each row an
// id derived from its position and the time of the event that appended
// it (else the previous row's), keeps the checksums valid (computing one
// for a row that had none), and leaves a damaged row for the load to
// report; reopening changes nothing.
func TestMigrateMessageIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v6.db")
	db := rawDB(t, path)
	first := `{"role":"user","content":"first"}`
	qs := []string{"PRAGMA journal_mode = WAL"}
	qs = append(qs, migrations[:6]...)
	qs = append(qs, fmt.Sprintf("PRAGMA user_version = 6; PRAGMA application_id = %d", applicationID),
		`INSERT INTO sessions (id, status, created_at, updated_at, turns, max_turns, version, base_from, base_to, own_from, length)
			VALUES ('old', 'active', 1000000000, 2, 1, 0, 3, 0, 0, 0, 3)`,
		fmt.Sprintf(`INSERT INTO messages (sid, pos, body, crc) VALUES (1, 0, '%s', %d)`, first, sessions.Checksum([]byte(first))),
		`INSERT INTO messages (sid, pos, body) VALUES (1, 1, '{"role":"assistant","content":"second"}')`,
		`INSERT INTO messages (sid, pos, body) VALUES (1, 2, '{"role":"user","content":"third"}')`,
		`INSERT INTO events (sid, seq, type, time, data, pos) VALUES (1, 1, 'message', 5000000000, '{"index":0,"role":"user"}', 0)`,
		`INSERT INTO events (sid, seq, type, time, data, pos) VALUES (1, 3, 'message', 7000000000, '{"index":2,"role":"user"}', 2)`,
		`INSERT INTO sessions (id, status, created_at, updated_at, turns, max_turns, version, base_from, base_to, own_from, length)
			VALUES ('damaged', 'active', 1, 2, 1, 0, 1, 0, 0, 0, 1)`,
		`INSERT INTO messages (sid, pos, body, crc) VALUES (2, 0, '{"role":"user","content":"edited"}', 1)`)
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b := openClosed(t, path)
	ctx := t.Context()
	rec, err := b.Load(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text string
		at   time.Time
	}{{"first", time.Unix(5, 0)}, {"second", time.Unix(5, 0)}, {"third", time.Unix(7, 0)}}
	ids := map[string]bool{}
	for i, m := range rec.Messages {
		if m.Text != want[i].text || !m.CreatedAt.Equal(want[i].at) || m.CreatedAt.Location() != time.UTC {
			t.Errorf("message %d: %q at %v, want %q at %v", i, m.Text, m.CreatedAt, want[i].text, want[i].at)
		}
		if m.ID != sessions.DerivedMessageID(want[i].at, fmt.Sprintf("sqlite/1/%d", i)) || ids[m.ID] {
			t.Errorf("message %d: id %q", i, m.ID)
		}
		ids[m.ID] = true
	}
	var unchecked int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE crc IS NULL`).Scan(&unchecked); err != nil || unchecked != 0 {
		t.Errorf("%d rows without a checksum after migrating (%v)", unchecked, err)
	}
	if _, err := b.Load(ctx, "damaged"); !errors.Is(err, sessions.ErrCorrupt) {
		t.Errorf("a damaged row after migrating: %v, want ErrCorrupt", err)
	}
	b.Close()
	again := openClosed(t, path)
	defer again.Close()
	rec2, err := again.Load(ctx, "old")
	if err != nil || !reflect.DeepEqual(rec2.Messages, rec.Messages) {
		t.Errorf("after reopening: %v, %v", rec2, err)
	}
}
