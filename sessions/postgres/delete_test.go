package postgres

import (
	"fmt"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// TestDeleteTakesRows: skein_messages and skein_events have no foreign
// keys (migration 10), and a session's deletion still takes its message
// and event rows with it, and only its own: through Delete (one session,
// a subtree) and through a DELETE of the session rows by hand, as an
// older skein or an operator would run.
func TestDeleteTakesRows(t *testing.T) {
	ctx := t.Context()
	b := openClosed(t, pgtest.DSN(t))
	var fks int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE contype = 'f' AND conrelid IN ('skein_messages'::regclass, 'skein_events'::regclass)`).Scan(&fks); err != nil || fks != 0 {
		t.Fatalf("foreign keys on skein_messages and skein_events: %d (%v), want none", fks, err)
	}
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{} // session id -> row id
	for _, id := range []string{"keep", "one", "tree", "byhand1", "byhand2"} {
		if err := store.Create(ctx, id, sessions.Info{}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint("m", i)}},
				Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
				t.Fatal(err)
			}
		}
		if rows[id], err = sessionRow(ctx, b.pool, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Fork(ctx, "tree", "tree.child", sessions.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Apply(ctx, "tree.child", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "own"}},
		Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
		t.Fatal(err)
	}
	if rows["tree.child"], err = sessionRow(ctx, b.pool, "tree.child"); err != nil {
		t.Fatal(err)
	}
	// stored counts the message and event rows of the sessions ids.
	stored := func(ids ...string) (messages, events int) {
		t.Helper()
		var sids []int64
		for _, id := range ids {
			sids = append(sids, rows[id])
		}
		if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skein_messages WHERE sid = ANY($1)),
			(SELECT count(*) FROM skein_events WHERE sid = ANY($1))`, sids).Scan(&messages, &events); err != nil {
			t.Fatal(err)
		}
		return messages, events
	}
	gone := func(what string, ids ...string) {
		t.Helper()
		if m, e := stored(ids...); m != 0 || e != 0 {
			t.Fatalf("%s: %d message and %d event rows left of %v", what, m, e, ids)
		}
	}
	keepM, keepE := stored("keep")
	if keepM != 3 || keepE < 3 {
		t.Fatalf("session keep: %d message and %d event rows, want 3 and at least 3", keepM, keepE)
	}
	if m, e := stored("tree.child"); m == 0 || e == 0 {
		t.Fatalf("the fork: %d message and %d event rows", m, e)
	}

	if err := store.Delete(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	gone("Delete", "one")
	if err := b.Delete(ctx, "tree", true); err != nil {
		t.Fatal(err)
	}
	gone("a recursive Delete", "tree", "tree.child")
	if _, err := b.pool.Exec(ctx, `DELETE FROM skein_sessions WHERE id IN ('byhand1', 'byhand2')`); err != nil {
		t.Fatal(err)
	}
	gone("a DELETE by hand", "byhand1", "byhand2")
	if m, e := stored("keep"); m != keepM || e != keepE {
		t.Fatalf("session keep: %d message and %d event rows after the deletes, had %d and %d", m, e, keepM, keepE)
	}
	if _, err := b.Load(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
}
