package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// testPoll is the lock poll interval of the tests.
const testPoll = 10 * time.Millisecond

func newTestLocker(t *testing.T, b *Backend) sessions.Locker {
	t.Helper()
	l, err := b.NewLocker(testPoll)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLocker runs the conformance tests with two Backends on one
// schema, as two processes would have.
func TestLocker(t *testing.T) {
	sessionstest.RunLockerTests(t, func(t *testing.T) (sessions.Locker, sessions.Locker) {
		dsn := pgtest.DSN(t)
		return newTestLocker(t, openClosed(t, dsn)), newTestLocker(t, openClosed(t, dsn))
	})
}

// TestLockOfDeadHolder: when the connection holding a lock ends (its
// process died), the lock is free at once, listed as abandoned until it
// is taken, and its holder, if it lives on, is told it lost the lock.
func TestLockOfDeadHolder(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, b := openClosed(t, dsn), openClosed(t, dsn)
	la, lb := newTestLocker(t, a), newTestLocker(t, b)
	lk, err := la.TryLock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lb.TryLock(ctx, "x"); !errors.Is(err, sessions.ErrLocked) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	pid := la.(*locker).connOf("x").conn.PgConn().PID()
	if _, err := b.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, err := lb.Abandoned(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 1 && names[0] == "x" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Abandoned: %v", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if held, err := lb.Held(ctx, []string{"x"}); err != nil || held["x"] {
		t.Fatalf("Held after the holder's connection ended: %v, %v", held, err)
	}
	taken, err := lb.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("TryLock of an abandoned lock: %v", err)
	}
	if names, err := lb.Abandoned(ctx, 0); err != nil || len(names) != 0 {
		t.Fatalf("Abandoned after taking it: %v, %v", names, err)
	}
	select {
	case <-lk.Interrupted():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told it lost its lock")
	}
	if lk.Reason() != sessions.ReasonLockLost {
		t.Fatalf("Reason %q", lk.Reason())
	}
	// The old holder's Unlock leaves the new holder's lock alone, and its
	// locker takes new locks on a new connection.
	lk.Unlock(ctx)
	if held, err := la.Held(ctx, []string{"x"}); err != nil || !held["x"] {
		t.Fatalf("the new holder's lock after a stale Unlock: %v, %v", held, err)
	}
	taken.Unlock(ctx)
	again, err := la.TryLock(ctx, "x")
	if err != nil {
		t.Fatalf("TryLock after reconnecting: %v", err)
	}
	again.Unlock(ctx)
}

// TestNotifier: a watcher hears of the events another backend appends,
// with the newest seq, and nothing after it stops watching.
func TestNotifier(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, b := openClosed(t, dsn), openClosed(t, dsn)
	n, err := a.NewNotifier()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s", "other"} {
		if err := store.Create(ctx, id, sessions.Info{}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan int64, 100)
	stop := n.Watch("s", func(seq int64) { got <- seq })
	appendOne := func(id string) {
		t.Helper()
		if _, err := store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}},
			Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The LISTEN may not be in place yet: append until word arrives.
	deadline := time.After(10 * time.Second)
	var seq int64
	for seq == 0 {
		appendOne("s")
		select {
		case seq = <-got:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification within 10s")
		}
	}
	last, err := a.LastSeqs(ctx, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	for seq < last["s"] { // word of the appends before the LISTEN took
		select {
		case seq = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("seq %d, stored %d", seq, last["s"])
		}
	}
	appendOne("other")
	appendOne("s")
	select {
	case next := <-got:
		if next != seq+2 {
			t.Fatalf("notified seq %d after %d, want %d (a message and a note event)", next, seq, seq+2)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
	stop()
	time.Sleep(100 * time.Millisecond)
	appendOne("s")
	select {
	case s := <-got:
		t.Fatalf("notified %d after Watch stopped", s)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestEventsAfter runs the event reader's conformance tests.
func TestEventsAfter(t *testing.T) {
	sessionstest.RunEventReaderTests(t, func(t *testing.T) sessions.Backend { return openClosed(t, pgtest.DSN(t)) })
}

// TestTryLockVersion: the lock taken with a session's version reads the
// version stored when the lock was taken (the last write of a holder
// that released it included), a missing session as ErrNotFound with the
// lock held, and a held lock as ErrLocked; an unlocked lock leaves no
// row once the watcher's next poll has deleted it, and is never listed
// as abandoned.
func TestTryLockVersion(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, b := openClosed(t, dsn), openClosed(t, dsn)
	la, lb := newTestLocker(t, a).(sessions.VersionLocker), newTestLocker(t, b).(sessions.VersionLocker)
	store, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, "s", sessions.Info{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		// b writes under the lock and releases it; a takes it next.
		sessionstest.CheckLockVersionHandoff(t, store, b, la, lb, "turn/s", "s", nil)
	}
	sessionstest.CheckLockVersionMissing(t, la, lb.(sessions.Locker))
	if names, err := lb.(sessions.Locker).Abandoned(ctx, 0); err != nil || len(names) != 0 {
		t.Fatalf("Abandoned: %v, %v", names, err)
	}
	waitLockRows(t, b, 0)
}

// twoLockers opens two Backends on a new test schema, as two processes
// would, each with a locker, and a store on the first with sessions ids.
func twoLockers(t *testing.T, ids ...string) (a, b *Backend, la, lb sessions.Locker, store *sessions.Store) {
	t.Helper()
	dsn := pgtest.DSN(t)
	a, b = openClosed(t, dsn), openClosed(t, dsn)
	la, lb = newTestLocker(t, a), newTestLocker(t, b)
	store, err := sessions.NewStore(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := store.Create(t.Context(), id, sessions.Info{}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, la, lb, store
}

// lockRows counts the rows of skein_locks.
func lockRows(t *testing.T, b *Backend) int {
	t.Helper()
	var rows int
	if err := b.Pool().QueryRow(t.Context(), `SELECT count(*) FROM skein_locks`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// waitLockRows waits until skein_locks has want rows (the watchers
// delete the rows of released locks at their next poll).
func waitLockRows(t *testing.T, b *Backend, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for lockRows(t, b) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d lock rows, want %d", lockRows(t, b), want)
		}
		time.Sleep(testPoll)
	}
}

// waitAbandoned waits until l lists exactly want as abandoned.
func waitAbandoned(t *testing.T, l sessions.Locker, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, err := l.Abandoned(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(names, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Abandoned: %v, want %v", names, want)
		}
		time.Sleep(testPoll)
	}
}

// TestTurnLockRow: a lock taken with TryLockVersion writes no row when
// it is taken or released; the first write of its session records it
// (once, whatever the writes after), so a holder that dies after writing
// leaves its lock abandoned, and one that dies before writing leaves
// nothing to repair. A released lock's row, until the watcher deletes
// it, is not abandoned: its connection lives.
func TestTurnLockRow(t *testing.T) {
	ctx := context.Background()
	a, b, la, lb, store := twoLockers(t, "s", "t")
	appendOne := func(id string) {
		t.Helper()
		if _, err := store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}},
			Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	vl := la.(sessions.VersionLocker)
	lk, _, err := vl.TryLockVersion(ctx, "turn/s", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := lockRows(t, a); n != 0 {
		t.Fatalf("%d lock rows after the take, want 0", n)
	}
	appendOne("s")
	appendOne("s")
	var holder string
	var conn int64
	if err := a.Pool().QueryRow(ctx, `SELECT holder, conn FROM skein_locks WHERE name = 'turn/s'`).Scan(&holder, &conn); err != nil {
		t.Fatalf("the lock's row after a write: %v", err)
	}
	if mine := lk.(*lock); holder != mine.holder || conn != la.(*locker).connOf("turn/s").key {
		t.Fatalf("row holder %s conn %d, want %s %d", holder, conn, mine.holder, la.(*locker).connOf("turn/s").key)
	}
	waitAbandoned(t, lb)
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitAbandoned(t, lb) // the row names a live connection
	waitLockRows(t, a, 0)

	// A holder that dies after writing: abandoned. One that dies before
	// writing ("t"): nothing.
	if lk, _, err = vl.TryLockVersion(ctx, "turn/s", "s"); err != nil {
		t.Fatal(err)
	}
	appendOne("s")
	if _, _, err := vl.TryLockVersion(ctx, "turn/t", "t"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"turn/s", "turn/t"} {
		pid := la.(*locker).connOf(name).conn.PgConn().PID()
		if _, err := b.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	waitAbandoned(t, lb, "turn/s")
	select {
	case <-lk.Interrupted():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told it lost its lock")
	}
	// The repair takes it (with TryLock), which clears it.
	fixed, err := lb.TryLock(ctx, "turn/s")
	if err != nil {
		t.Fatal(err)
	}
	waitAbandoned(t, lb)
	if err := fixed.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitAbandoned(t, lb)
	waitLockRows(t, a, 0)
}

// TestTurnLockRowKept: a turn lock's row outlives its release (schema
// version 12's locker, see NewLocker): the next hold on the same
// connection finds it and its write writes no row; a hold of another
// process records its own connection in it; a hold that finds it and is
// lost keeps it for the repair (the watcher deletes no row of a lock held
// since); and the watcher deletes a row kept keepPolls polls.
func TestTurnLockRowKept(t *testing.T) {
	ctx := context.Background()
	a, b, la, lb, store := twoLockers(t, "s")
	otherStore, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func(s *sessions.Store) {
		t.Helper()
		if err := s.Refresh(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, "s", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}},
			Events: []sessions.Event{sessions.NewEvent("note", nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		holder string
		conn   int64
		xmin   string
	}
	read := func() (r row) {
		t.Helper()
		if err := a.Pool().QueryRow(ctx, `SELECT holder, conn, xmin::text FROM skein_locks WHERE name = 'turn/s'`).Scan(&r.holder, &r.conn, &r.xmin); err != nil {
			t.Fatalf("the lock's row: %v", err)
		}
		return r
	}
	turn := func(l sessions.Locker, s *sessions.Store) sessions.Lock {
		t.Helper()
		lk, _, err := l.(sessions.VersionLocker).TryLockVersion(ctx, "turn/s", "s")
		if err != nil {
			t.Fatal(err)
		}
		appendOne(s)
		return lk
	}
	// Kept for as long as the test needs (the take after a release must
	// come within the time a row is kept).
	keep := func(d time.Duration) {
		l := la.(*locker)
		l.mu.Lock()
		l.keep = d
		l.mu.Unlock()
	}
	keep(time.Minute)

	first := turn(la, store)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r1 := read()
	if r1.holder != first.(*lock).holder || r1.conn != la.(*locker).connOf("turn/s").key {
		t.Fatalf("row %+v after the first turn", r1)
	}
	second := turn(la, store)
	if r := read(); r != r1 {
		t.Fatalf("row %+v after the next turn on the connection, want %+v unwritten", r, r1)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Another process's turn: its write records its own connection.
	other := turn(lb, otherStore)
	if r := read(); r.holder != other.(*lock).holder || r.conn != lb.(*locker).connOf("turn/s").key {
		t.Fatalf("row %+v after another process's turn", r)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Back on a's connection, whose row is rewritten; then lost.
	lost := turn(la, store)
	if r := read(); r.holder != lost.(*lock).holder || r.conn != la.(*locker).connOf("turn/s").key {
		t.Fatalf("row %+v back on the first process", r)
	}
	if err := lost.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	keep(keepPolls * testPoll)
	lost = turn(la, store)
	pid := la.(*locker).connOf("turn/s").conn.PgConn().PID()
	if _, err := b.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	waitAbandoned(t, lb, "turn/s")
	time.Sleep(4 * keepPolls * testPoll)
	waitAbandoned(t, lb, "turn/s") // a's watcher did not delete it
	fixed, err := lb.TryLock(ctx, "turn/s")
	if err != nil {
		t.Fatal(err)
	}
	if err := fixed.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitLockRows(t, a, 0)
	// A row kept keepPolls polls is deleted.
	if err := turn(la, store).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := lockRows(t, a); n != 1 {
		t.Fatalf("%d lock rows after a turn, want 1", n)
	}
	waitLockRows(t, a, 0)
}

// TestInterruptSparesTheNextHolder: Interrupt stops the holder it marked,
// not a lock taken after that holder let go, by its own process (a
// cancel from replica a stopped b's turn and then a's next queued turn,
// which had taken the lock in between: TestReplicasOneTurn failed so
// about once in a hundred runs under load) or by another (which polls
// the marks): the mark names the hold it saw.
func TestInterruptSparesTheNextHolder(t *testing.T) {
	for _, another := range []bool{false, true} {
		name := "here"
		if another {
			name = "another process"
		}
		t.Run(name, func(t *testing.T) { interruptSparesTheNextHolder(t, another) })
	}
}

func interruptSparesTheNextHolder(t *testing.T, another bool) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	la, lb := newTestLocker(t, openClosed(t, dsn)), newTestLocker(t, openClosed(t, dsn))
	taker := la
	if another {
		taker = newTestLocker(t, openClosed(t, dsn))
	}
	first, err := lb.TryLock(ctx, "turn/s")
	if err != nil {
		t.Fatal(err)
	}
	var next sessions.Lock
	afterInterruptMark = func() {
		// b's holder lets go at once and the next one takes the lock.
		if err := first.Unlock(ctx); err != nil {
			t.Error(err)
		}
		if next, err = taker.TryLock(ctx, "turn/s"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterInterruptMark = nil })
	held, err := la.Interrupt(ctx, "turn/s", "cancel")
	if err != nil || !held {
		t.Fatalf("Interrupt: %v, %v", held, err)
	}
	if next == nil {
		t.Fatal("the next holder did not take the lock")
	}
	defer next.Unlock(ctx)
	select {
	case <-next.Interrupted():
		t.Fatalf("the next holder was interrupted: %q", next.Reason())
	case <-time.After(5 * testPoll):
	}
	// A new Interrupt reaches it.
	afterInterruptMark = nil
	if held, err := lb.Interrupt(ctx, "turn/s", "delete"); err != nil || !held {
		t.Fatalf("Interrupt: %v, %v", held, err)
	}
	select {
	case <-next.Interrupted():
	case <-time.After(10 * time.Second):
		t.Fatal("the next holder was not interrupted")
	}
	if next.Reason() != "delete" {
		t.Fatalf("Reason %q", next.Reason())
	}
}

// TestUnlockSoon: a turn lock released with UnlockSoon is taken again
// at once through the same locker (its release rides on the take, so
// the earlier hold's locks are gone), and is free for another process
// within releaseDelay and a round trip, with no statement of its
// connection to ride on; a lock taken with TryLock is released at once.
func TestUnlockSoon(t *testing.T) {
	ctx := context.Background()
	a, _, la, lb, _ := twoLockers(t, "s")
	vl := la.(sessions.VersionLocker)
	// holds counts the hold locks of turn/s granted in the database.
	holds := func() (n int) {
		t.Helper()
		err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
			AND classid = (hashtext($1)::bigint & 4294967295)::oid`, a.schema+"/turn/s").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		lk, v, err := vl.TryLockVersion(ctx, "turn/s", "s")
		if err != nil || v.Err != nil {
			t.Fatalf("take after UnlockSoon: %v, %v", err, v.Err)
		}
		if n := holds(); n != 1 {
			t.Fatalf("%d hold locks of turn/s, want 1 (the earlier hold released first)", n)
		}
		lk.(sessions.SoonUnlocker).UnlockSoon()
	}
	deadline := time.Now().Add(time.Second)
	for {
		lk, err := lb.TryLock(ctx, "turn/s")
		if err == nil {
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, sessions.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("another process's take after UnlockSoon: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if n := holds(); n != 0 {
		t.Fatalf("%d hold locks of turn/s after the releases, want 0", n)
	}
	lk, err := la.TryLock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	lk.(sessions.SoonUnlocker).UnlockSoon()
	if held, err := lb.Held(ctx, []string{"other"}); err != nil || held["other"] {
		t.Fatalf("a TryLock's lock after UnlockSoon: held %v, %v", held, err)
	}
}

// TestUnlockSoonReadsReleased: a turn lock released with UnlockSoon
// whose release is not sent yet reads free to Held and Interrupt in its
// own process (serve reads a session as idle, and answers a cancel with
// 409, right after its turn ended there), while another process still
// finds it held until the release is sent.
func TestUnlockSoonReadsReleased(t *testing.T) {
	ctx := context.Background()
	a, _, _, lb, _ := twoLockers(t, "s")
	// A locker of a's with a poll and a release delay longer than the
	// test: the release is sent only with the next take.
	la, err := a.NewLocker(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { la.Close() })
	l := la.(*locker)
	l.mu.Lock()
	l.releaseAfter = time.Hour
	l.mu.Unlock()
	held := func(lr sessions.Locker) bool {
		t.Helper()
		h, err := lr.Held(ctx, []string{"turn/s"})
		if err != nil {
			t.Fatal(err)
		}
		return h["turn/s"]
	}
	vl := la.(sessions.VersionLocker)
	for range 2 {
		lk, v, err := vl.TryLockVersion(ctx, "turn/s", "s")
		if err != nil || v.Err != nil {
			t.Fatalf("take: %v, %v", err, v.Err)
		}
		if !held(la) || !held(lb) {
			t.Fatal("a held turn lock reads free")
		}
		lk.(sessions.SoonUnlocker).UnlockSoon()
		if held(la) {
			t.Fatal("a turn lock released with UnlockSoon reads held in its own process")
		}
		if interrupted, err := la.Interrupt(ctx, "turn/s", "test"); err != nil || interrupted {
			t.Fatalf("Interrupt of a turn lock released with UnlockSoon in its own process: %v, %v", interrupted, err)
		}
		if !held(lb) {
			t.Fatal("another process finds the lock free before its release was sent")
		}
	}
}
