package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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
// for them
// (keyed by a hash of the schema and the lock's name), so PostgreSQL
// releases it the moment its holder's connection ends: a holder whose
// process dies, on any machine, frees its locks as soon as the server
// sees the connection close. A row of table skein_locks records each
// held lock, for Interrupt (its reason column, which the holder reads
// every poll) and Abandoned (a row whose advisory lock is free); the
// table is part of the schema (migration 2).
//
// The locks are spread over several connections (as many as the pool
// has, at most 16, each opened when first needed; a lock's name picks its
// connection), so that turns taking and releasing locks at once do not
// queue for one connection.
//
// Taking a lock and releasing it are one round trip each, on the lock's
// connection: taking it is one statement that takes the advisory lock
// and, if it got it, writes the row; releasing it is a pipeline of two
// transactions, the row's DELETE and then the advisory unlock, so that
// the row is gone before the lock is free (Abandoned never sees a lock
// being released as abandoned). The lock connections commit without
// waiting for the WAL flush (synchronous_commit off): it writes only lock
// rows, and the WAL is flushed in order, so a session write of the
// holder that survives a database crash has its lock row's insert with
// it; a crash can only lose a release, and a lock row left behind by a
// lost release is listed as abandoned once the database is back, like a
// holder's that died, and its repair finds nothing to repair.
func (b *Backend) NewLocker(poll time.Duration) (sessions.Locker, error) {
	if poll <= 0 {
		return nil, fmt.Errorf("postgres: lock poll interval must be positive, got %s", poll)
	}
	ctx := context.Background()
	l := &locker{b: b, poll: poll, held: map[string]*lock{}, done: make(chan struct{})}
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
}

// lockConns is how many connections a locker spreads its locks over: as
// many as the pool has (a turn takes and releases a lock about as often
// as it writes), at most maxLockConns.
func (b *Backend) lockConns() int { return min(b.MaxConns(), maxLockConns) }

// maxLockConns bounds a locker's connections.
const maxLockConns = 16

// lockConn is a connection of a locker.
type lockConn struct {
	// mu serialises the use of conn.
	mu   sync.Mutex
	conn *pgx.Conn // nil until first needed, and after it broke
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
}

// advisory is the advisory lock key of the lock whose qualified name
// (see qualified) the SQL expression arg gives.
func advisory(arg string) string { return `hashtextextended(` + arg + `, 0)` }

// heldSQL is an SQL condition that is true when the advisory lock of the
// lock whose qualified name arg gives is granted to some connection.
func heldSQL(arg string) string {
	k := advisory(arg)
	return `EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = ((` + k + ` >> 32) & 4294967295)::oid AND objid = (` + k + ` & 4294967295)::oid)`
}

// The statements of the lock connection. tryLockSQL takes the advisory
// lock of $1 (the qualified name) and, if it got it, records holder $3 of
// lock $2 in the same statement (one round trip, one commit).
// Each is prepared on the connection, named by its ...Stmt constant.
var (
	tryLockSQL = `WITH l AS (SELECT pg_try_advisory_lock(` + advisory("$1") + `) AS ok),
	r AS (INSERT INTO skein_locks (name, holder) SELECT $2, $3 FROM l WHERE ok
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, interrupt = NULL)
SELECT ok FROM l`
	tryLockStmt   = "skein_lock_try"
	versionStmt   = "skein_lock_version"
	deleteRowSQL  = `DELETE FROM skein_locks WHERE name = $1 AND holder = $2`
	deleteRowStmt = "skein_lock_delete"
	unlockSQL     = `SELECT pg_advisory_unlock(` + advisory("$1::text") + `)`
	unlockStmt    = "skein_lock_unlock"
)

// connect opens the connection that holds the locks, which commits
// without waiting for the WAL flush (see NewLocker), and prepares the
// statements of Unlock on it.
func (l *locker) connect(ctx context.Context, c *lockConn) error {
	cfg := l.b.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	for stmt, sql := range map[string]string{tryLockStmt: tryLockSQL, versionStmt: versionSQL, deleteRowStmt: deleteRowSQL, unlockStmt: unlockSQL} {
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
	c.conn = conn
	return nil
}

// qualified is the name of lock name in the database: its schema and
// name.
func (l *locker) qualified(name string) string { return l.b.schema + "/" + name }

func (l *locker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	lk, _, err := l.take(ctx, name, "")
	return lk, err
}

var _ sessions.VersionLocker = (*locker)(nil)

// TryLockVersion takes the lock and reads session id's version in one
// round trip: a pipeline of the lock's statement and then the version's,
// in one transaction (one sync). At read committed each statement takes
// its own snapshot, so the version is read after the lock is held: a
// holder that wrote, committed and released before it is seen.
func (l *locker) TryLockVersion(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	return l.take(ctx, name, id)
}

// take takes the lock called name and, when id is not "", reads session
// id's stored version after it.
func (l *locker) take(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	var v sessions.StoredVersion
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, v, errors.New("postgres: locker is closed")
	case l.held[name] != nil:
		// Advisory locks nest within a connection: refuse here.
		l.mu.Unlock()
		return nil, v, sessions.ErrLocked
	}
	lk := &lock{l: l, name: name, holder: uuid.NewString()}
	l.held[name] = lk // reserved; removed again on failure
	l.mu.Unlock()
	v, err := l.tryLock(ctx, lk, id)
	if err != nil {
		l.mu.Lock()
		delete(l.held, name)
		l.mu.Unlock()
		return nil, v, err
	}
	return lk, v, nil
}

// tryLock takes lk's advisory lock and records it (tryLockSQL), then,
// when id is not "", reads session id's version (versionSQL) in the same
// round trip. It runs without ctx's cancellation: a query cancelled
// halfway could leave the lock taken unknown to the caller, or end the
// connection, which holds every other lock too.
func (l *locker) tryLock(ctx context.Context, lk *lock, id string) (sessions.StoredVersion, error) {
	ctx = context.WithoutCancel(ctx)
	var ok bool
	var v sessions.StoredVersion
	c := l.connOf(lk.name)
	c.mu.Lock()
	err := l.ensureConn(ctx, c, lk)
	if err == nil {
		ok, v, err = l.lockStatements(ctx, c.conn, lk, id)
		if err != nil && c.conn.IsClosed() {
			// The connection had broken (a database restart) and this
			// query found out: connect again and try once more.
			if err = l.ensureConn(ctx, c, lk); err == nil {
				ok, v, err = l.lockStatements(ctx, c.conn, lk, id)
			}
		}
		if err != nil && c.conn != nil && !c.conn.IsClosed() {
			// The statement failed after it may have taken the advisory
			// lock, which a failed transaction does not release.
			c.conn.Exec(ctx, unlockStmt, l.qualified(lk.name))
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

// lockStatements runs tryLockSQL for lk on conn, its lock connection,
// and, when id is not "", versionSQL for session id after it, in one
// round trip and one transaction. The caller holds the connection's mu.
func (l *locker) lockStatements(ctx context.Context, conn *pgx.Conn, lk *lock, id string) (ok bool, v sessions.StoredVersion, err error) {
	if id == "" {
		err = conn.QueryRow(ctx, tryLockStmt, l.qualified(lk.name), lk.name, lk.holder).Scan(&ok)
		return ok, v, err
	}
	p := conn.PgConn().StartPipeline(ctx)
	p.SendQueryPrepared(tryLockStmt, [][]byte{[]byte(l.qualified(lk.name)), []byte(lk.name), []byte(lk.holder)}, nil, nil)
	p.SendQueryPrepared(versionStmt, [][]byte{[]byte(id)}, nil, nil)
	p.SendPipelineSync()
	err = p.Flush()
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

// unlockAdvisory releases the advisory lock of name (a broken connection
// released it already).
func (l *locker) unlockAdvisory(name string) error {
	c := l.connOf(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	_, err := c.conn.Exec(context.Background(), unlockStmt, l.qualified(name))
	return err
}

// release deletes lk's row and then releases its advisory lock: two
// transactions in one round trip (a pipeline with a sync after each), in
// that order. A broken connection released the advisory lock already:
// the row is then deleted through the pool.
func (l *locker) release(lk *lock) error {
	ctx := context.Background()
	c := l.connOf(lk.name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		_, err := l.b.pool.Exec(ctx, deleteRowSQL, lk.name, lk.holder)
		return err
	}
	p := c.conn.PgConn().StartPipeline(ctx)
	p.SendQueryPrepared(deleteRowStmt, [][]byte{[]byte(lk.name), []byte(lk.holder)}, nil, nil)
	p.SendPipelineSync()
	p.SendQueryPrepared(unlockStmt, [][]byte{[]byte(l.qualified(lk.name))}, nil, nil)
	p.SendPipelineSync()
	err := p.Flush()
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

func (l *locker) Interrupt(ctx context.Context, name, reason string) (bool, error) {
	var held bool
	var holder string
	err := l.b.pool.QueryRow(ctx, `SELECT `+heldSQL("$1"), l.qualified(name)).Scan(&held)
	if err == nil && held {
		// The holder asked is the one whose row this marks: by the time
		// this process looks at its own locks below, that holder may
		// have seen the mark and released the lock, and this process
		// taken it again for its next turn, which must not be stopped.
		err = l.b.pool.QueryRow(ctx, `UPDATE skein_locks SET interrupt = COALESCE(interrupt, $2) WHERE name = $1 RETURNING holder`, name, reason).Scan(&holder)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // released between the two statements, row first
		}
	}
	if err != nil {
		return false, fmt.Errorf("postgres: interrupt lock '%s': %w", name, err)
	}
	if !held {
		return false, nil
	}
	if afterInterruptMark != nil {
		afterInterruptMark()
	}
	// A holder in this process learns of it at once.
	l.mu.Lock()
	lk := l.held[name]
	l.mu.Unlock()
	if lk != nil && lk.holder == holder {
		lk.Interrupt(reason)
	}
	return true, nil
}

// afterInterruptMark, when set by a test, runs in Interrupt after the
// holder's row is marked, before this process's own locks are looked at.
var afterInterruptMark func()

func (l *locker) Held(ctx context.Context, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	rows, err := l.b.pool.Query(ctx, `SELECT n FROM unnest($2::text[]) AS n WHERE `+heldSQL(`$1 || '/' || n`), l.b.schema, names)
	if err != nil {
		return nil, fmt.Errorf("postgres: locks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("postgres: locks: %w", err)
		}
		out[n] = true
	}
	return out, rows.Err()
}

// Abandoned asks twice: a statement sees the rows of its snapshot but
// pg_locks as it is when read, so a lock unlocked (row deleted, then
// advisory lock released) while the statement ran would look abandoned
// to it. The second statement, whose snapshot is later than the first
// one's reading of pg_locks, no longer sees such a row.
func (l *locker) Abandoned(ctx context.Context, limit int) ([]string, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	names, err := l.abandoned(ctx, `SELECT name FROM skein_locks WHERE NOT `+heldSQL(`$1 || '/' || name`)+` ORDER BY name LIMIT $2`, l.b.schema, lim)
	if err != nil || len(names) == 0 {
		return names, err
	}
	return l.abandoned(ctx, `SELECT name FROM skein_locks WHERE name = ANY($2) AND NOT `+heldSQL(`$1 || '/' || name`)+` ORDER BY name`, l.b.schema, names)
}

// abandoned runs one query of Abandoned.
func (l *locker) abandoned(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := l.b.pool.Query(ctx, query, args...)
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
	l := lk.l
	l.mu.Lock()
	mine := l.held[lk.name] == lk
	if mine {
		delete(l.held, lk.name)
	}
	l.mu.Unlock()
	if !mine {
		return nil
	}
	if err := l.release(lk); err != nil {
		return fmt.Errorf("postgres: unlock '%s': %w", lk.name, err)
	}
	return nil
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
	// still find them held.
	for _, c := range l.conns {
		c.mu.Lock()
		if c.conn != nil && !c.conn.IsClosed() {
			c.conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
		}
		c.mu.Unlock()
	}
	l.cancel()
	<-l.done
	var errs []error
	for _, lk := range held {
		lk.Interrupt(sessions.ReasonLockLost)
		_, err := l.b.pool.Exec(context.Background(), deleteRowSQL, lk.name, lk.holder)
		errs = append(errs, err)
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
// holding them broke (it connects again for the next locks).
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
		l.mu.Lock()
		held := make(map[string]*lock, len(l.held))
		holders := make([]string, 0, len(l.held))
		used := map[*lockConn]bool{}
		for name, lk := range l.held {
			held[lk.holder] = lk
			holders = append(holders, lk.holder)
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
		rows, err := l.b.pool.Query(ctx, `SELECT holder, interrupt FROM skein_locks WHERE holder = ANY($1) AND interrupt IS NOT NULL`, holders)
		if err != nil {
			continue // the next poll tries again
		}
		for rows.Next() {
			var holder, reason string
			if rows.Scan(&holder, &reason) == nil && held[holder] != nil {
				held[holder].Interrupt(reason)
			}
		}
		rows.Close()
	}
}

// lose interrupts held, whose connection broke, as lost.
func (l *locker) lose(held map[string]*lock) {
	l.mu.Lock()
	for _, lk := range held {
		if l.held[lk.name] == lk {
			delete(l.held, lk.name)
		}
	}
	l.mu.Unlock()
	for _, lk := range held {
		lk.Interrupt(sessions.ReasonLockLost)
	}
}
