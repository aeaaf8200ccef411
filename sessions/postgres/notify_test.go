package postgres

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// TestEveryWriteNotifies: with no trigger on skein_events (schema
// version 9), each way of appending events (a session's creation with
// events, an append in one statement, a write that releases a frozen view in a
// transaction, a fork, which records events on its source and its new
// session) notifies the channel of each session it appended to at its
// commit, once, with the newest stored seq, while another listener is
// registered (schema version 12); a write whose statement finds the
// session at a newer version than it read notifies nothing.
func TestEveryWriteNotifies(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	b, other, store, otherStore := twoStores(t, dsn)
	var triggers int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'skein_events'::regclass AND NOT tgisinternal`).Scan(&triggers); err != nil || triggers != 0 {
		t.Fatalf("triggers on skein_events: %d (%v), want none", triggers, err)
	}
	conn := registeredListener(t, dsn)
	// The schema is new: its sessions' row ids are 1, 2, 3.
	for sid := range int64(3) {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{eventChannel(b.schema, sid+1)}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	// expect checks that the notifications that arrive next are exactly
	// one for each of ids, with its newest seq, and then nothing.
	expect := func(what string, ids ...string) {
		t.Helper()
		got := map[string]string{}
		for len(got) < len(ids) {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v after %v", what, err, got)
			}
			if _, dup := got[n.Channel]; dup {
				t.Fatalf("%s: %s notified twice", what, n.Channel)
			}
			got[n.Channel] = n.Payload
		}
		quiet(t, conn, what)
		last, err := b.LastSeqs(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			sid, err := sessionRow(ctx, b.pool, id)
			if err != nil {
				t.Fatal(err)
			}
			if ch := eventChannel(b.schema, sid); got[ch] != strconv.FormatInt(last[id], 10) || last[id] == 0 {
				t.Fatalf("%s: session %s (row %d, newest seq %d): notified %v", what, id, sid, last[id], got)
			}
		}
	}
	note := func() *sessions.Change {
		return &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}},
			Events: []sessions.Event{sessions.NewEvent("note", nil)}}
	}

	if err := store.Create(ctx, "a", sessions.Info{}); err != nil {
		t.Fatal(err)
	}
	expect("a creation", "a")
	if _, err := store.Apply(ctx, "a", note()); err != nil {
		t.Fatal(err)
	}
	expect("an append", "a")
	if _, err := store.Fork(ctx, "a", "b", sessions.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("a fork", "a", "b")
	// b shares a's messages: a reset releases the frozen view, in a
	// transaction.
	if _, err := store.Apply(ctx, "b", &sessions.Change{Replace: true, ReplaceWith: []message.Message{{Role: message.RoleUser, Text: "new"}},
		Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
		t.Fatal(err)
	}
	expect("a write that releases a view", "b")
	// b's backend holds a's state as it wrote it; another writes a, so
	// b's next write runs its statement on a guess that is stale: it
	// updates nothing (and notifies nothing), reads the state and fails.
	rec, err := b.Load(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherStore.Apply(ctx, "a", note()); err != nil {
		t.Fatal(err)
	}
	expect("another backend's append", "a")
	stale := note()
	stale.Events[0].Seq, stale.Events[0].Time = rec.Events[len(rec.Events)-1].Seq+1, time.Now()
	if err := b.Write(ctx, "a", rec.Version, stale); !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("a write at the version before another's: %v, want ErrConflict", err)
	}
	quiet(t, conn, "a write that lost")
	// A creation with events (a copy of a session, an import) writes
	// them in its transaction.
	c, err := b.Load(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	c.ID, c.ParentID, c.ChildIDs = "c", "", nil
	for i := range c.Events {
		c.Events[i].SessionID = "c"
	}
	if err := other.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	expect("a creation with events", "c")
}

// quiet fails t if a notification arrives on conn within 200 ms.
func quiet(t *testing.T, conn *pgx.Conn, what string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if n, err := conn.WaitForNotification(wctx); err == nil {
		t.Fatalf("%s: then %s %q, want nothing more", what, n.Channel, n.Payload)
	}
}

// twoStores opens two Backends on the schema of dsn, as two processes
// would, and a store on each.
func twoStores(t *testing.T, dsn string) (b, other *Backend, store, otherStore *sessions.Store) {
	t.Helper()
	b, other = openClosed(t, dsn), openClosed(t, dsn)
	var err error
	if store, err = sessions.NewStore(b); err != nil {
		t.Fatal(err)
	}
	if otherStore, err = sessions.NewStore(other); err != nil {
		t.Fatal(err)
	}
	return b, other, store, otherStore
}

// registeredListener returns a connection to dsn registered as a
// listener in skein_listeners, as a Notifier's is (see NewNotifier).
func registeredListener(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), registerSQL(), 4242); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestNotifyOnlyOthers: a write notifies its session's channel only
// while a listener other than its own Backend's notifiers is registered
// (schema version 12): the only listener of a process is not woken by
// the process's own writes; another Backend's writes reach it, and once
// another notifier registers, the first Backend's writes notify again,
// until that notifier is closed. A row of a listener whose connection
// died makes writes notify until the next listener registers, which
// deletes it.
func TestNotifyOnlyOthers(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	b, other, store, otherStore := twoStores(t, dsn)
	if err := store.Create(ctx, "a", sessions.Info{}); err != nil {
		t.Fatal(err)
	}
	sid, err := sessionRow(ctx, b.pool, "a")
	if err != nil {
		t.Fatal(err)
	}
	// spy listens to a's channel without registering: it hears a's
	// notifications, which writes send only for registered listeners.
	spy, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close(context.Background())
	if _, err := spy.Exec(ctx, "LISTEN "+pgx.Identifier{eventChannel(b.schema, sid)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	heard := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := spy.WaitForNotification(wctx); err != nil {
			t.Fatalf("%s: no notification: %v", what, err)
		}
		quiet(t, spy, what)
	}
	note := func(s *sessions.Store) {
		t.Helper()
		// The other store may have written a since.
		if err := s.Refresh(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, "a", &sessions.Change{Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	listeners := func() (n int) {
		t.Helper()
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM skein_listeners`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	note(store)
	quiet(t, spy, "a write with no listener registered")
	nb, err := b.NewNotifier()
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	got := make(chan int64, 16)
	stop := nb.Watch("a", func(seq int64) { got <- seq })
	defer stop()
	if n := listeners(); n != 1 {
		t.Fatalf("%d listeners registered, want 1", n)
	}
	note(store)
	quiet(t, spy, "a write whose Backend has the only listener")
	select {
	case seq := <-got:
		t.Fatalf("the Backend's own notifier was told of its write (seq %d)", seq)
	default:
	}
	note(otherStore)
	heard("another Backend's write")
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the notifier was not told of another Backend's write")
	}
	no, err := other.NewNotifier()
	if err != nil {
		t.Fatal(err)
	}
	stopOther := no.Watch("a", func(int64) {})
	note(store)
	heard("a write while another Backend listens")
	stopOther()
	no.Close()
	if n := listeners(); n != 1 {
		t.Fatalf("%d listeners registered after a notifier closed, want 1", n)
	}
	note(store)
	quiet(t, spy, "a write after the other notifier closed")
	// A row whose connection is gone (no lock on its key).
	if _, err := b.pool.Exec(ctx, `INSERT INTO skein_listeners (key) VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	note(store)
	heard("a write while a dead listener's row is left")
	registeredListener(t, dsn)
	if n := listeners(); n != 2 {
		t.Fatalf("%d listeners registered, want 2 (the dead one's row deleted)", n)
	}
}
