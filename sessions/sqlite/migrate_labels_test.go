package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// TestMigrateLabels upgrades a database of schema version 13 that holds
// a sealed session, a plain one and one without metadata: migration 14
// refuses without the store's key (and changes nothing), then with it
// fills repo_id and agent of both (the sealed one's from its opened
// metadata), and indexes the plain labels, not the sealed one, for the
// text search; the listings by repository, agent and text find them.
func TestMigrateLabels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v13.db")
	key := sessionstest.NewKey(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	create := func(b *Backend, rec *sessions.Record) {
		t.Helper()
		rec.Status, rec.CreatedAt, rec.UpdatedAt = sessions.StatusActive, at, at
		at = at.Add(time.Minute)
		if err := b.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	sealed, err := Open(path, WithKey(key))
	if err != nil {
		t.Fatal(err)
	}
	create(sealed, &sessions.Record{ID: "sealed", Title: "Sealed work", Metadata: map[string]any{"repoId": "r1", "agent": "a1"}})
	sealed.Close()
	plain := openTest(t, path)
	create(plain, &sessions.Record{ID: "plain", Title: "Plain work", Metadata: map[string]any{"repoId": "r2", "agent": "a1", "n": 3}})
	create(plain, &sessions.Record{ID: "bare", FirstPrompt: "hello there"})
	plain.Close()
	db := rawDB(t, path)
	for _, q := range version13 {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := Migrate(path); err == nil || !strings.Contains(err.Error(), "sealed metadata (the first: 'sealed')") ||
		!strings.Contains(err.Error(), "--encryption-key-file") {
		t.Fatalf("Migrate without the key: %v, want an error saying to give the key", err)
	}
	if v := pragma[int](t, db, "user_version"); v != 13 {
		t.Fatalf("after the refused migration: version %d, want 13", v)
	}
	if from, err := Migrate(path, WithKey(key)); err != nil || from != 13 {
		t.Fatalf("Migrate with the key: from %d, %v", from, err)
	}
	var got []string
	rows, err := db.Query(`SELECT id, coalesce(repo_id, '-'), coalesce(agent, '-'), (SELECT count(*) FROM session_text t WHERE t.rowid = s.sid)
		FROM sessions s ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, repo, agent string
		var indexed int
		if err := rows.Scan(&id, &repo, &agent, &indexed); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(id, " ", repo, " ", agent, " ", indexed))
	}
	if want := "[bare - - 1 plain r2 a1 1 sealed r1 a1 0]"; fmt.Sprint(got) != want {
		t.Errorf("rows (id repo_id agent in-text-index) %v, want %s", got, want)
	}
	b, err := Open(path, WithKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for f, want := range map[*sessions.ListFilter]string{
		{RepoID: "r1"}:                "[sealed]",
		{Agent: "a1"}:                 "[plain sealed]",
		{Agent: "a1", Limit: 1}:       "[plain]",
		{Text: "WORK"}:                "[plain sealed]",
		{Text: "there"}:               "[bare]",
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
