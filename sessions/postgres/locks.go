package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// NewLocker returns the database's cross-process locks. A lock is a
// session-level advisory lock of one of the connections the Locker keeps
// for them (keyed by a hash of the schema and the lock's name), so
// PostgreSQL releases it the moment its holder's connection ends: a
// holder whose process dies, on any machine, frees its locks as soon as
// the server sees the connection close.
//
// Beside it each hold takes a second advisory lock, its hold lock (the
// two-key form: a hash of the lock's name and a number drawn for the
// hold), taken before the lock and released after it. It names the hold
// in pg_locks, so that Interrupt can mark the hold it saw, in table
// skein_lock_interrupts, and no later hold of the same lock (a holder
// polls the marks of its locks every poll). And each lock connection
// holds, as long as it lives, an advisory lock of its own (its
// connection key), by which a row of table skein_locks tells whether the
// connection it names is alive.
//
// A row of skein_locks records a hold whose holder may leave work to
// repair if it dies (Abandoned: a row whose lock is free and whose
// connection is gone). A lock taken with TryLock writes its row when it
// is taken and deletes it when it is released, as before. A lock taken
// with TryLockVersion(name, id), a turn's, writes no row of its own: the
// first write of session id through this Backend while it is held
// records it, in the write's own statement (so in its transaction and at
// its commit: a write that survives a crash has its row with it), and
// its release only frees the advisory locks. So taking and releasing a
// turn's lock writes nothing, and a holder that dies before it wrote the
// session leaves nothing to repair, and no row.
//
// The row of a released turn lock is kept keepPolls polls (the session's
// next turn is likely to come soon, to the same process): a hold on the
// same connection whose write finds the row with its connection key
// writes none (the row's holder is then an earlier hold's: a turn's row
// is told apart by its connection, not its holder); a hold elsewhere
// records its own connection in it. The watcher deletes the rows kept
// that long whose lock was not taken again here since, once per poll, in
// one statement that deletes none whose lock is held (a take here waits
// for that statement when it names its lock). A kept row names a live
// connection and is not listed; if that connection dies, it is listed,
// and its repair finds nothing to repair.
//
// The locks are spread over several connections (half as many as the
// pool has, at least 1 and at most 16, each opened when first needed; a
// lock's name picks its connection), so that turns taking and releasing
// locks at once seldom queue for one connection, while each connection
// carries enough statements for a turn's release (UnlockSoon) to ride on
// another's most of the time. Taking a lock is one statement on its
// connection (with TryLockVersion, pipelined with the version's read);
// releasing one is one statement too (a TryLock's: its row's DELETE, then
// the advisory unlocks, two transactions in one round trip, so that
// Abandoned never sees a row whose lock is being released). A turn's lock
// released with UnlockSoon costs no round trip of its own: its unlock
// statement goes out first with its connection's next statement, or on
// its own after releaseDelay (10 ms). The lock
// connections commit without waiting for the WAL flush
// (synchronous_commit off): they write only the rows of TryLock's locks,
// and the WAL is flushed in order, so a session write of such a holder
// that survives a database crash has its lock row's insert with it.
func (b *Backend) NewLocker(poll time.Duration) (sessions.Locker, error) {
	if poll <= 0 {
		return nil, fmt.Errorf("postgres: lock poll interval must be positive, got %s", poll)
	}
	ctx := context.Background()
	l := &locker{b: b, poll: poll, held: map[string]*lock{}, kept: map[string]keptRow{}, clearing: map[string]bool{},
		keep: keepPolls * poll, releaseAfter: releaseDelay, done: make(chan struct{})}
	l.conns = make([]*lockConn, max(b.lockConns(), 1))
	for i := range l.conns {
		l.conns[i] = &lockConn{}
	}
	// The first connection now, so that an unreachable database fails
	// here; the others when a lock first needs them.
	if err := l.connect(ctx, l.conns[0]); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	go l.watch(wctx)
	return l, nil
}

// locker is a sessions.Locker over advisory locks and table skein_locks.
type locker struct {
	b      *Backend
	poll   time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	// conns are the connections that hold the advisory locks: a lock's
	// is connOf its name.
	conns []*lockConn

	mu     sync.Mutex
	held   map[string]*lock // by name
	closed bool
	// gone are the released holds whose mark (skein_lock_interrupts)
	// the watcher deletes at its next poll.
	gone []*lock
	// kept are the rows of skein_locks that writes recorded for turn
	// locks now released, by name: the watcher deletes each once it has
	// been kept for keepPolls polls with its lock not held again here.
	// clearing are those it is deleting: a take of one waits until
	// cleared is closed, the statement done.
	kept     map[string]keptRow
	clearing map[string]bool
	cleared  chan struct{}
	// keep is how long a row is kept: keepPolls polls (a test may
	// change it, under mu).
	keep time.Duration
	// releaseAfter is how long a release by UnlockSoon may wait for a
	// statement to ride on: releaseDelay (a test may change it, under
	// mu).
	releaseAfter time.Duration
}

// keptRow is a row of skein_locks kept after its lock was released.
type keptRow struct {
	conn  int64     // its connection key
	since time.Time // when its last hold was released
}

// keepPolls is how many polls a turn lock's row is kept after its
// release (see NewLocker): a session's next turn on the same connection
// within that time finds it and writes none.
const keepPolls = 8

// lockConns is how many connections a locker spreads its locks over:
// half as many as the pool has (a turn takes and releases a lock about
// as often as it writes, and its release rides on the next statement of
// its connection: with as many connections as the pool, under 200
// sessions a third of the releases waited releaseDelay for none and went
// alone, with half as many a seventh), at least 1, at most maxLockConns.
func (b *Backend) lockConns() int { return min(max(b.MaxConns()/2, 1), maxLockConns) }

// maxLockConns bounds a locker's connections.
const maxLockConns = 16

// lockConn is a connection of a locker.
type lockConn struct {
	// mu serialises the use of conn.
	mu   sync.Mutex
	conn *pgx.Conn // nil until first needed, and after it broke
	// key is the advisory lock conn holds as long as it lives (its
	// connection key, recorded in the rows of its locks).
	key int64
	// pending are the releases (lock.UnlockSoon) not sent yet: sent
	// before the connection's next statement, in the same round trip,
	// or by flushPending once releaseDelay has passed (timer, nil when
	// none is due).
	pending []pendingRelease
	timer   *time.Timer
}

// pendingRelease is a release by UnlockSoon not sent yet: the lock's
// name (Held reads it as released) and the parameters of unlockStmt.
type pendingRelease struct {
	name   string
	params [][]byte
}

// releasing reports whether the lock called name has a release of this
// locker not sent yet: released here, though the database still shows
// it held.
func (l *locker) releasing(name string) bool {
	c := l.connOf(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.pending {
		if r.name == name {
			return true
		}
	}
	return false
}

// releaseDelay bounds how long a release by UnlockSoon waits for a
// statement of its connection to ride on: with the locks spread over the
// pool's connections, another lock statement of the same connection
// (a turn taking its lock, another releasing one) comes within it most
// of the time under load.
const releaseDelay = 10 * time.Millisecond

// sendPending queues c's pending releases on p, with a sync after them,
// and reports whether it queued any. The caller holds c.mu.
func sendPending(c *lockConn, p *pgconn.Pipeline) bool {
	if len(c.pending) == 0 {
		return false
	}
	for _, r := range c.pending {
		p.SendQueryPrepared(unlockStmt, r.params, nil, nil)
	}
	p.SendPipelineSync()
	c.pending = nil
	return true
}

// drainPending reads the results of the releases sendPending queued, up
// to their sync. A release that failed in the database is let go (its
// holder is gone); an error of the connection is returned.
func drainPending(p *pgconn.Pipeline) error {
	for {
		res, err := p.GetResults()
		if rr, ok := res.(*pgconn.ResultReader); ok {
			_, err = rr.Close()
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
		case err != nil:
			return err
		case res == nil:
			return nil
		}
		if _, ok := res.(*pgconn.PipelineSync); ok {
			return nil
		}
	}
}

// flushPending sends c's pending releases in a round trip of their own
// (the timer's, the watcher's). A failure is the connection's
// (drainPending lets a refused unlock go): the connection is closed,
// which releases its locks, and its next use connects again and tells
// the holders it had that they lost them (ensureConn). The caller holds
// c.mu.
func (l *locker) flushPending(c *lockConn) {
	if len(c.pending) == 0 {
		return
	}
	if c.conn == nil || c.conn.IsClosed() {
		c.pending = nil // released with the connection
		return
	}
	p := c.conn.PgConn().StartPipeline(context.Background())
	sendPending(c, p)
	err := p.Flush()
	if err == nil {
		err = drainPending(p)
	}
	p.Close()
	if err != nil {
		c.conn.Close(context.Background())
	}
}

// connOf returns the connection that holds the lock called name.
func (l *locker) connOf(name string) *lockConn {
	h := fnv.New32a()
	h.Write([]byte(name))
	return l.conns[h.Sum32()%uint32(len(l.conns))]
}

// lock is one lock a locker holds.
type lock struct {
	sessions.LockSignal
	l            *locker
	name, holder string
	// hold is the second key of its hold lock (the first: holdKey).
	hold int32
	// conn is the connection key of the connection holding it.
	conn int64
	// id is the session whose writes record its row (TryLockVersion);
	// "" when its row was written when it was taken (TryLock).
	id string
	// taken: it is held, so writes of its session record it; recorded:
	// its row may be stored (both under lockRecords.mu); marked: an
	// Interrupt marked it (under l.mu). The watcher deletes the row and
	// the mark a hold left once it is released.
	taken, recorded, marked bool
}

// advisory is the advisory lock key of the lock whose qualified name
// (see qualified) the SQL expression arg gives.
func advisory(arg string) string { return `hashtextextended(` + arg + `, 0)` }

// holdKey is the first key of the hold locks of the lock whose qualified
// name the SQL expression arg gives (the second is the hold's number).
func holdKey(arg string) string { return `hashtext(` + arg + `)` }

// locksCTE is a CTE (named a) of the advisory locks granted in the
// database, read once: pg_locks takes a consistent picture of every
// lock each time it is read.
const locksCTE = `a AS MATERIALIZED (SELECT pid, classid, objid, objsubid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// keyIs is an SQL condition on a row of CTE a: it is the one-key
// advisory lock whose key the SQL expression k gives (pg_locks shows a
// bigint key as its high and low 32 bits).
func keyIs(k string) string {
	return `a.objsubid = 1 AND a.classid = ((` + k + ` >> 32) & 4294967295)::oid AND a.objid = (` + k + ` & 4294967295)::oid`
}

// keyIn is an SQL condition that is true when the one-key advisory lock
// whose key the SQL expression k gives is among the locks of CTE a.
func keyIn(k string) string { return `EXISTS (SELECT 1 FROM a WHERE ` + keyIs(k) + `)` }

// takeSQL takes the hold lock ($1: the qualified name, $2: the hold's
// number) and then the lock of $1, giving the hold lock back if the lock
// is held by another; it returns whether it got the lock, in column ok
// of CTE l. row is the CTE that records the hold (name $3, holder $4,
// connection key $5) when it got it, or "" (TryLockVersion's locks).
func takeSQL(row string) string {
	return `WITH s AS MATERIALIZED (SELECT pg_try_advisory_lock(` + holdKey("$1") + `, $2) AS ok),
	l AS MATERIALIZED (SELECT CASE WHEN NOT s.ok THEN false
		WHEN pg_try_advisory_lock(` + advisory("$1") + `) THEN true
		ELSE NOT pg_advisory_unlock(` + holdKey("$1") + `, $2) END AS ok FROM s)` + row + `
SELECT ok FROM l`
}

// recordSQL is the statement of a lock row: the hold of lock $n, holder
// $h, connection key $c (n, h, c: the parameters' numbers) from the rows
// of the query from, replacing a row of an earlier hold.
func recordSQL(n, h, c int, from string) string {
	return fmt.Sprintf(`INSERT INTO skein_locks (name, holder, conn) SELECT $%d::text, $%d::text, $%d::bigint FROM %s
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, conn = excluded.conn, interrupt = NULL`, n, h, c, from)
}

// recordKeptSQL is recordSQL for a turn's lock (see NewLocker): it
// writes nothing when the lock's row is there already with connection
// key $c (kept since an earlier hold on the same connection), whatever
// its holder.
func recordKeptSQL(n, h, c int, from string) string {
	return recordSQL(n, h, c, fmt.Sprintf(`%s WHERE NOT EXISTS (SELECT 1 FROM skein_locks WHERE name = $%d::text AND conn = $%d::bigint)`, from, n, c))
}

// The statements of the lock connection, each prepared on it, named by
// its ...Stmt constant. tryLockSQL takes a lock and records it (one
// round trip, one commit); takeLockSQL takes one that the writes of its
// session record (no write).
var (
	tryLockSQL    = takeSQL(`, r AS (` + recordSQL(3, 4, 5, `l WHERE ok`) + `)`)
	tryLockStmt   = "skein_lock_try"
	takeLockSQL   = takeSQL("")
	takeLockStmt  = "skein_lock_take"
	versionStmt   = "skein_lock_version"
	deleteRowSQL  = `DELETE FROM skein_locks WHERE name = $1 AND holder = $2`
	deleteRowStmt = "skein_lock_delete"
	unlockSQL     = `SELECT pg_advisory_unlock(` + advisory("$1::text") + `), pg_advisory_unlock(` + holdKey("$1::text") + `, $2::integer)`
	unlockStmt    = "skein_lock_unlock"
)

// connect opens a connection that holds locks, which commits without
// waiting for the WAL flush (see NewLocker), takes its connection key,
// and prepares the statements of the locks on it.
func (l *locker) connect(ctx context.Context, c *lockConn) error {
	cfg := l.b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	key := rand.Int64()
	if err == nil {
		if _, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, key); err != nil {
			conn.Close(context.Background())
		}
	}
	for stmt, sql := range map[string]string{tryLockStmt: tryLockSQL, takeLockStmt: takeLockSQL, versionStmt: versionSQL, deleteRowStmt: deleteRowSQL, unlockStmt: unlockSQL} {
		if err != nil {
			break
		}
		if _, err = conn.Prepare(ctx, stmt, sql); err != nil {
			conn.Close(context.Background())
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: %s: lock connection: %w", l.b.dsn, err)
	}
	c.conn, c.key = conn, key
	return nil
}

// qualified is the name of lock name in the database: its schema and
// name.
func (l *locker) qualified(name string) string { return l.b.schema + "/" + name }

// lockRecords are the locks taken with TryLockVersion, by session id,
// whose row (skein_locks) the first write of the session through the
// Backend records (see NewLocker and Backend.Write).
type lockRecords struct {
	mu sync.Mutex
	m  map[string]*lock
}

// add registers lk, held for session id; false when another lock of
// the session is registered (lk then records its row itself).
func (r *lockRecords) add(id string, lk *lock) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[id] != nil {
		return false
	}
	if r.m == nil {
		r.m = map[string]*lock{}
	}
	r.m[id] = lk
	return true
}

// hold notes that lk, registered, was taken.
func (r *lockRecords) hold(lk *lock) {
	r.mu.Lock()
	lk.taken = true
	r.mu.Unlock()
}

// pending returns the lock held for session id whose row no write
// recorded yet, or nil.
func (r *lockRecords) pending(id string) *lock {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lk := r.m[id]; lk != nil && lk.taken && !lk.recorded {
		return lk
	}
	return nil
}

// written notes that a write of lk's session may have stored its row.
func (r *lockRecords) written(lk *lock) {
	r.mu.Lock()
	lk.recorded = true
	r.mu.Unlock()
}

// remove unregisters lk (released or lost) and reports whether its row
// may be stored: false for a lock it never registered (TryLock's).
func (r *lockRecords) remove(lk *lock) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[lk.id] == lk {
		delete(r.m, lk.id)
	}
	return lk.recorded
}

func (l *locker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	lk, _, err := l.take(ctx, name, "")
	return lk, err
}

var _ sessions.VersionLocker = (*locker)(nil)

// TryLockVersion takes the lock and reads session id's version in one
// round trip: a pipeline of the lock's statement and then the version's,
// in one transaction (one sync). At read committed each statement takes
// its own snapshot, so the version is read after the lock is held: a
// holder that wrote, committed and released before it is seen. The
// lock's row is recorded by the first write of session id through this
// Backend while it is held (see NewLocker).
func (l *locker) TryLockVersion(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	return l.take(ctx, name, id)
}

// take takes the lock called name and, when id is not "", reads session
// id's stored version after it.
func (l *locker) take(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	var v sessions.StoredVersion
	l.mu.Lock()
	for l.clearing[name] && !l.closed {
		// The watcher is deleting the row a write of this hold could
		// find and keep: wait for the statement.
		cleared := l.cleared
		l.mu.Unlock()
		<-cleared
		l.mu.Lock()
	}
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, v, errors.New("postgres: locker is closed")
	case l.held[name] != nil:
		// Advisory locks nest within a connection: refuse here.
		l.mu.Unlock()
		return nil, v, sessions.ErrLocked
	}
	lk := &lock{l: l, name: name, holder: uuid.NewString(), hold: rand.Int32N(math.MaxInt32) + 1}
	l.held[name] = lk // reserved; removed again on failure
	// A row kept from an earlier hold is this hold's now: released, it is
	// kept again; lost, it stays for the repair.
	kept, wasKept := l.kept[name]
	delete(l.kept, name)
	l.mu.Unlock()
	if id != "" && l.b.lockRecords.add(id, lk) {
		lk.id = id
	}
	v, err := l.tryLock(ctx, lk, id)
	if err != nil {
		l.b.lockRecords.remove(lk)
		l.mu.Lock()
		delete(l.held, name)
		if _, again := l.kept[name]; wasKept && !again {
			l.kept[name] = kept
		}
		l.mu.Unlock()
		return nil, v, err
	}
	if lk.id != "" {
		l.b.lockRecords.hold(lk)
	}
	return lk, v, nil
}

// tryLock takes lk's advisory locks and, unless its session's writes
// record it, its row, then, when id is not "", reads session id's
// version (versionSQL) in the same round trip. It runs without ctx's
// cancellation: a query cancelled halfway could leave the lock taken
// unknown to the caller, or end the connection, which holds every other
// lock too.
func (l *locker) tryLock(ctx context.Context, lk *lock, id string) (sessions.StoredVersion, error) {
	ctx = context.WithoutCancel(ctx)
	var ok bool
	var v sessions.StoredVersion
	c := l.connOf(lk.name)
	c.mu.Lock()
	err := l.ensureConn(ctx, c, lk)
	if err == nil {
		ok, v, err = l.lockStatements(ctx, c, lk, id)
		if err != nil && c.conn.IsClosed() {
			// The connection had broken (a database restart) and this
			// query found out: connect again and try once more.
			if err = l.ensureConn(ctx, c, lk); err == nil {
				ok, v, err = l.lockStatements(ctx, c, lk, id)
			}
		}
		if err != nil && c.conn != nil && !c.conn.IsClosed() {
			// The statement failed after it may have taken the advisory
			// locks, which a failed transaction does not release.
			c.conn.Exec(ctx, unlockStmt, l.qualified(lk.name), lk.hold)
		}
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		return v, fmt.Errorf("postgres: lock '%s': %w", lk.name, err)
	case !ok:
		return v, sessions.ErrLocked
	}
	if v.Err != nil {
		v.Err = sessions.IDError(id, v.Err)
	}
	return v, nil
}

// lockStatements runs lk's take statement on c, its lock connection (the
// one that records its row unless its session's writes do), and, when
// id is not "", versionSQL for session id after it, in one round trip
// and one transaction. The caller holds c.mu.
func (l *locker) lockStatements(ctx context.Context, c *lockConn, lk *lock, id string) (ok bool, v sessions.StoredVersion, err error) {
	lk.conn = c.key
	hold := strconv.FormatInt(int64(lk.hold), 10)
	stmt, params := takeLockStmt, [][]byte{[]byte(l.qualified(lk.name)), []byte(hold)}
	if lk.id == "" {
		stmt = tryLockStmt
		params = append(params, []byte(lk.name), []byte(lk.holder), []byte(strconv.FormatInt(c.key, 10)))
	}
	p := c.conn.PgConn().StartPipeline(ctx)
	released := sendPending(c, p)
	p.SendQueryPrepared(stmt, params, nil, nil)
	if id != "" {
		p.SendQueryPrepared(versionStmt, [][]byte{[]byte(id)}, nil, nil)
	}
	p.SendPipelineSync()
	err = p.Flush()
	if err == nil && released {
		err = drainPending(p)
	}
	for i := 0; err == nil; {
		var res any
		if res, err = p.GetResults(); res == nil && err == nil {
			break
		}
		rr, isRows := res.(*pgconn.ResultReader)
		if !isRows {
			continue
		}
		rows := rr.Read()
		switch {
		case rows.Err != nil:
			err = rows.Err
		case i == 0 && len(rows.Rows) == 1:
			ok = string(rows.Rows[0][0]) == "t"
		case i == 0:
			err = fmt.Errorf("the lock statement returned %d rows", len(rows.Rows))
		case len(rows.Rows) == 0:
			v.Err = sessions.ErrNotFound
		default:
			var created int64
			v.Version, v.Err = strconv.ParseInt(string(rows.Rows[0][0]), 10, 64)
			if v.Err == nil {
				created, v.Err = strconv.ParseInt(string(rows.Rows[0][1]), 10, 64)
				v.Created = rowstore.DecodeTime(created)
			}
		}
		i++
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return ok, v, err
}

// ensureConn connects c when it is not yet connected, or again when it
// broke (the watcher found it broken, or a query did: after a database
// restart). The locks held on a broken connection went with it: they are
// interrupted as lost, except taking, the lock being taken. The caller
// holds c.mu.
func (l *locker) ensureConn(ctx context.Context, c *lockConn, taking *lock) error {
	if c.conn != nil && !c.conn.IsClosed() {
		return nil
	}
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
		c.pending = nil // released with the connection
		l.lose(l.heldOn(c, taking))
	}
	return l.connect(ctx, c)
}

// heldOn returns the locks held on connection c (by holder), but
// except.
func (l *locker) heldOn(c *lockConn, except *lock) map[string]*lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]*lock{}
	for name, lk := range l.held {
		if lk != except && l.connOf(name) == c {
			out[lk.holder] = lk
		}
	}
	return out
}

// release releases lk's advisory locks, after deleting its row when it
// was written at the take (two transactions in one round trip: a
// pipeline with a sync after each, in that order). A broken connection
// released the advisory locks already: the row is then deleted through
// the pool.
func (l *locker) release(lk *lock) error {
	ctx := context.Background()
	c := l.connOf(lk.name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		if lk.id != "" {
			return nil
		}
		_, err := l.b.pool.Exec(ctx, deleteRowSQL, lk.name, lk.holder)
		return err
	}
	p := c.conn.PgConn().StartPipeline(ctx)
	released := sendPending(c, p)
	if lk.id == "" {
		p.SendQueryPrepared(deleteRowStmt, [][]byte{[]byte(lk.name), []byte(lk.holder)}, nil, nil)
		p.SendPipelineSync()
	}
	p.SendQueryPrepared(unlockStmt, l.unlockParams(lk), nil, nil)
	p.SendPipelineSync()
	err := p.Flush()
	if err == nil && released {
		err = drainPending(p)
	}
	for err == nil {
		var res any
		if res, err = p.GetResults(); res == nil && err == nil {
			break
		}
		if rr, ok := res.(*pgconn.ResultReader); ok {
			_, err = rr.Close()
		}
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

// interruptSQL is the statement that marks the holds of lock $2
// (qualified name $1) that pg_locks shows (the hold locks, of the first key of $1,
// of the connection holding the lock) with reason $3, unless marked
// already, and deletes the marks of the lock's holds that are over. It
// returns whether the lock is held and the holds it marked: all from one
// reading of pg_locks, in which a hold lock outlives its lock on both
// sides, so the hold marked is the one holding the lock then. (Built
// when used, as abandonedSQL: both are rare, and the package's
// initialisation stays small.)
func interruptSQL() string {
	return `WITH ` + locksCTE + `,
	h AS (SELECT pid FROM a WHERE ` + keyIs(advisory("$1")) + `),
	s AS (SELECT DISTINCT a.objid::bigint AS hold FROM a JOIN h USING (pid)
		WHERE a.objsubid = 2 AND a.classid = (` + holdKey("$1") + `::bigint & 4294967295)::oid),
	d AS (DELETE FROM skein_lock_interrupts WHERE name = $2 AND hold NOT IN (SELECT hold FROM s)),
	i AS (INSERT INTO skein_lock_interrupts (name, hold, reason) SELECT $2, hold, $3 FROM s ON CONFLICT DO NOTHING)
SELECT EXISTS (SELECT 1 FROM h), ARRAY(SELECT hold FROM s)`
}

func (l *locker) Interrupt(ctx context.Context, name, reason string) (bool, error) {
	if l.releasing(name) {
		// Released here, its release not sent yet: no other process
		// can hold it, and there is nothing left to stop.
		return false, nil
	}
	var held bool
	var holds []int64
	err := l.b.pool.QueryRow(ctx, interruptSQL(), l.qualified(name), name, reason).Scan(&held, &holds)
	if err != nil {
		return false, fmt.Errorf("postgres: interrupt lock '%s': %w", name, err)
	}
	if !held {
		return false, nil
	}
	if afterInterruptMark != nil {
		afterInterruptMark()
	}
	// A holder in this process learns of it at once; by now the hold
	// marked may have ended and this process taken the lock again for
	// its next turn, a new hold, which must not be stopped.
	l.mu.Lock()
	lk := l.held[name]
	if lk != nil && slices.Contains(holds, int64(lk.hold)) {
		lk.marked = true
	} else {
		lk = nil
	}
	l.mu.Unlock()
	if lk != nil {
		lk.Interrupt(reason)
	}
	return true, nil
}

// afterInterruptMark, when set by a test, runs in Interrupt after the
// holder's hold is marked, before this process's own locks are looked at.
var afterInterruptMark func()

func (l *locker) Held(ctx context.Context, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	// The names among $2 whose lock (in schema $1) is held, from one
	// reading of pg_locks.
	rows, err := l.b.pool.Query(ctx, `WITH `+locksCTE+`
SELECT n FROM unnest($2::text[]) AS n WHERE `+keyIn(advisory(`$1 || '/' || n`)), l.b.schema, names)
	if err != nil {
		return nil, fmt.Errorf("postgres: locks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("postgres: locks: %w", err)
		}
		// A lock released here whose release is not sent yet reads
		// free, as it will: its holder's work is done (serve's session
		// reads right after a turn must not show it running; Interrupt
		// does the same, so a cancel right after it answers 409).
		if !l.releasing(n) {
			out[n] = true
		}
	}
	return out, rows.Err()
}

// abandonedSQL is the statement that lists the rows of skein_locks
// whose lock is free and whose connection (its connection key) is gone, from one reading of
// pg_locks. A row of an older skein (no connection key) counts when its
// lock is free. A row being deleted by its holder's release names a live
// connection, so no row of a lock being released is listed.
func abandonedSQL() string {
	return `WITH ` + locksCTE + `
SELECT name FROM skein_locks WHERE NOT ` + keyIn(advisory(`$1 || '/' || name`)) + `
	AND (conn IS NULL OR NOT ` + keyIn(`conn`) + `)
ORDER BY name LIMIT $2`
}

func (l *locker) Abandoned(ctx context.Context, limit int) ([]string, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := l.b.pool.Query(ctx, abandonedSQL(), l.b.schema, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: locks: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: locks: %w", err)
	}
	return names, nil
}

func (lk *lock) Unlock(ctx context.Context) error {
	if !lk.l.unhold(lk) {
		return nil
	}
	l := lk.l
	err := l.release(lk)
	l.forget(lk)
	if err != nil {
		return fmt.Errorf("postgres: unlock '%s': %w", lk.name, err)
	}
	return nil
}

// unhold removes lk from the held locks, reporting whether it was there
// (false: released already).
func (l *locker) unhold(lk *lock) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.held[lk.name] == lk
	if mine {
		delete(l.held, lk.name)
	}
	return mine
}

// unlockParams are the parameters of unlockStmt that release lk.
func (l *locker) unlockParams(lk *lock) [][]byte {
	return [][]byte{[]byte(l.qualified(lk.name)), []byte(strconv.FormatInt(int64(lk.hold), 10))}
}

var _ sessions.SoonUnlocker = (*lock)(nil)

// UnlockSoon releases a lock taken with TryLockVersion (a turn's) with
// its connection's next statement, or after releaseDelay (10 ms) at the
// latest, without waiting for it: its advisory locks stay held until
// then, which other processes see as a turn that ended that much later.
// A take of the same lock through this locker uses the same connection,
// so it comes after the release. A lock taken with TryLock, whose row
// is deleted at its release, is released as Unlock does.
func (lk *lock) UnlockSoon() {
	if lk.id == "" {
		lk.Unlock(context.Background())
		return
	}
	l := lk.l
	if !l.unhold(lk) {
		return
	}
	l.mu.Lock()
	after := l.releaseAfter
	l.mu.Unlock()
	c := l.connOf(lk.name)
	c.mu.Lock()
	if c.conn != nil && !c.conn.IsClosed() {
		c.pending = append(c.pending, pendingRelease{lk.name, l.unlockParams(lk)})
		if c.timer == nil {
			c.timer = time.AfterFunc(after, func() {
				c.mu.Lock()
				c.timer = nil
				l.flushPending(c)
				c.mu.Unlock()
			})
		}
	}
	c.mu.Unlock()
	l.forget(lk)
}

// forget unregisters lk, released, from its session's writes and
// leaves what it wrote (its row, if a write recorded it, kept for the
// session's next turns; its mark) to the watcher to delete.
func (l *locker) forget(lk *lock) {
	recorded := l.b.lockRecords.remove(lk)
	l.mu.Lock()
	if recorded {
		l.kept[lk.name] = keptRow{conn: lk.conn, since: time.Now()}
	}
	if lk.marked {
		l.gone = append(l.gone, lk)
	}
	l.mu.Unlock()
}

// clearSQL deletes the rows ($1 names, $2 connection keys; their lock
// in schema $5) of released holds, but a row whose lock is held again
// (from one reading of pg_locks), and the marks ($3 names, $4 holds) of
// released holds, in one statement. (Built on use: see interruptSQL.)
func clearSQL() string {
	return `WITH ` + locksCTE + `,
	r AS (DELETE FROM skein_locks k USING unnest($1::text[], $2::bigint[]) AS g (name, conn)
		WHERE k.name = g.name AND k.conn = g.conn AND NOT ` + keyIn(advisory(`$5::text || '/' || g.name`)) + `)
DELETE FROM skein_lock_interrupts i USING unnest($3::text[], $4::bigint[]) AS g (name, hold)
	WHERE i.name = g.name AND i.hold = g.hold`
}

// clear deletes rows (by name) and the marks of holds, through the pool.
func (l *locker) clear(ctx context.Context, rows map[string]keptRow, holds []*lock) error {
	var names, marked []string
	var conns, marks []int64
	for name, r := range rows {
		names, conns = append(names, name), append(conns, r.conn)
	}
	for _, lk := range holds {
		marked, marks = append(marked, lk.name), append(marks, int64(lk.hold))
	}
	_, err := l.b.pool.Exec(ctx, clearSQL(), names, conns, marked, marks, l.b.schema)
	return err
}

// clearGone deletes what the released holds left (see forget): the
// marks, and the rows kept keepPolls polls whose lock is not held here
// again; what it could not delete is left for the next poll. A take of a
// lock whose row it is deleting waits for the statement (so no hold's
// write finds the row and keeps it while it is being deleted), and the
// statement deletes no row whose lock is held.
func (l *locker) clearGone(ctx context.Context) {
	l.mu.Lock()
	gone := l.gone
	l.gone = nil
	rows := map[string]keptRow{}
	for name, r := range l.kept {
		if l.held[name] == nil && time.Since(r.since) >= l.keep {
			rows[name] = r
			l.clearing[name] = true
			delete(l.kept, name)
		}
	}
	cleared := make(chan struct{})
	l.cleared = cleared
	l.mu.Unlock()
	defer close(cleared)
	if len(gone) == 0 && len(rows) == 0 {
		return
	}
	err := l.clear(ctx, rows, gone)
	l.mu.Lock()
	for name, r := range rows {
		delete(l.clearing, name)
		if _, again := l.kept[name]; err != nil && !again {
			l.kept[name] = r
		}
	}
	if err != nil {
		l.gone = append(l.gone, gone...)
	}
	l.mu.Unlock()
}

func (l *locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	held := l.held
	l.held = map[string]*lock{}
	l.mu.Unlock()
	// Release the advisory locks first, on the open connections (under
	// their mu, so no ping of the watcher is using them; stopping the
	// watcher can close a connection in the middle of one). The server
	// frees a closed connection's locks only once its backend process has
	// exited, after Close would return, so a TryLock right after could
	// still find them held. The connection keys stay held until the
	// connections close, after the rows naming them are deleted.
	for _, c := range l.conns {
		c.mu.Lock()
		c.pending = nil // released by pg_advisory_unlock_all
		if c.conn != nil && !c.conn.IsClosed() {
			c.conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all(), pg_advisory_lock($1::bigint)`, c.key)
		}
		c.mu.Unlock()
	}
	l.cancel()
	<-l.done
	l.mu.Lock()
	gone, rows := l.gone, l.kept
	l.gone, l.kept = nil, map[string]keptRow{}
	for _, lk := range held {
		rows[lk.name] = keptRow{conn: lk.conn}
		if lk.marked {
			gone = append(gone, lk)
		}
	}
	l.mu.Unlock()
	for _, lk := range held {
		lk.Interrupt(sessions.ReasonLockLost)
		l.b.lockRecords.remove(lk)
	}
	var errs []error
	if len(rows) > 0 || len(gone) > 0 {
		errs = append(errs, l.clear(context.Background(), rows, gone))
	}
	for _, c := range l.conns {
		c.mu.Lock()
		if c.conn != nil {
			errs = append(errs, c.conn.Close(context.Background()))
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// watch checks the held locks every poll until ctx ends: it interrupts
// those another holder asked for, and every one when the connection
// holding them broke (it connects again for the next locks); and it
// deletes what released holds left.
func (l *locker) watch(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(l.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, c := range l.conns {
			// Releases due before the rows are looked at (clearGone
			// deletes no row whose lock is still held).
			c.mu.Lock()
			l.flushPending(c)
			c.mu.Unlock()
		}
		l.clearGone(ctx)
		l.mu.Lock()
		held := make(map[string]*lock, len(l.held))
		names := make([]string, 0, len(l.held))
		used := map[*lockConn]bool{}
		for name, lk := range l.held {
			held[name] = lk
			names = append(names, name)
			used[l.connOf(name)] = true
		}
		l.mu.Unlock()
		if len(held) == 0 {
			continue
		}
		for c := range used {
			c.mu.Lock()
			err := l.ensureConn(ctx, c, nil)
			if err == nil {
				if err = c.conn.Ping(ctx); err != nil && ctx.Err() == nil {
					// The advisory locks went with the connection.
					c.conn.Close(context.Background())
					c.conn = nil
				}
			}
			c.mu.Unlock()
			if err != nil {
				l.lose(l.heldOn(c, nil))
			}
		}
		rows, err := l.b.pool.Query(ctx, `SELECT name, hold, reason FROM skein_lock_interrupts WHERE name = ANY($1)`, names)
		if err != nil {
			continue // the next poll tries again
		}
		var marked []*lock
		var reasons []string
		for rows.Next() {
			var name, reason string
			var hold int64
			if rows.Scan(&name, &hold, &reason) == nil && held[name] != nil && int64(held[name].hold) == hold {
				marked, reasons = append(marked, held[name]), append(reasons, reason)
			}
		}
		rows.Close()
		l.mu.Lock()
		for _, lk := range marked {
			lk.marked = true
		}
		l.mu.Unlock()
		for i, lk := range marked {
			lk.Interrupt(reasons[i])
		}
	}
}

// lose interrupts held, whose connection broke, as lost. Their rows stay:
// their holders were cut off, and what they wrote may need repair.
func (l *locker) lose(held map[string]*lock) {
	l.mu.Lock()
	for _, lk := range held {
		if l.held[lk.name] == lk {
			delete(l.held, lk.name)
		}
	}
	l.mu.Unlock()
	for _, lk := range held {
		l.b.lockRecords.remove(lk)
		lk.Interrupt(sessions.ReasonLockLost)
	}
}
