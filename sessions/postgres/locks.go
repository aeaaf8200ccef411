package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
)

// NewLocker returns the database's cross-process locks. A lock is a
// session-level advisory lock of a connection the Locker keeps for them
// (keyed by a hash of the schema and the lock's name), so PostgreSQL
// releases it the moment its holder's connection ends: a holder whose
// process dies, on any machine, frees its locks as soon as the server
// sees the connection close. A row of table skein_locks records each
// held lock, for Interrupt (its reason column, which the holder reads
// every poll) and Abandoned (a row whose advisory lock is free); the
// table is part of the schema (migration 2).
func (b *Backend) NewLocker(poll time.Duration) (sessions.Locker, error) {
	if poll <= 0 {
		return nil, fmt.Errorf("postgres: lock poll interval must be positive, got %s", poll)
	}
	ctx := context.Background()
	l := &locker{b: b, poll: poll, held: map[string]*lock{}, done: make(chan struct{})}
	if err := l.connect(ctx); err != nil {
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

	// connMu serialises the use of conn, the connection that holds the
	// advisory locks.
	connMu sync.Mutex
	conn   *pgx.Conn

	mu     sync.Mutex
	held   map[string]*lock // by name
	closed bool
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

// connect opens the connection that holds the locks.
func (l *locker) connect(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.b.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: %s: lock connection: %w", l.b.dsn, err)
	}
	l.conn = conn
	return nil
}

// qualified is the name of lock name in the database: its schema and
// name.
func (l *locker) qualified(name string) string { return l.b.schema + "/" + name }

func (l *locker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, errors.New("postgres: locker is closed")
	case l.held[name] != nil:
		// Advisory locks nest within a connection: refuse here.
		l.mu.Unlock()
		return nil, sessions.ErrLocked
	}
	lk := &lock{l: l, name: name, holder: uuid.NewString()}
	l.held[name] = lk // reserved; removed again on failure
	l.mu.Unlock()
	err := l.tryLock(ctx, lk)
	if err != nil {
		l.mu.Lock()
		delete(l.held, name)
		l.mu.Unlock()
		return nil, err
	}
	return lk, nil
}

// tryLock takes lk's advisory lock and records it. It runs without
// ctx's cancellation: a query cancelled halfway could leave the lock
// taken unknown to the caller, or end the connection, which holds every
// other lock too.
func (l *locker) tryLock(ctx context.Context, lk *lock) error {
	ctx = context.WithoutCancel(ctx)
	var ok bool
	l.connMu.Lock()
	err := l.ensureConn(ctx, lk)
	if err == nil {
		err = l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+advisory("$1")+`)`, l.qualified(lk.name)).Scan(&ok)
		if err != nil && l.conn.IsClosed() {
			// The connection had broken (a database restart) and this
			// query found out: connect again and try once more.
			if err = l.ensureConn(ctx, lk); err == nil {
				err = l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+advisory("$1")+`)`, l.qualified(lk.name)).Scan(&ok)
			}
		}
	}
	l.connMu.Unlock()
	switch {
	case err != nil:
		return fmt.Errorf("postgres: lock '%s': %w", lk.name, err)
	case !ok:
		return sessions.ErrLocked
	}
	_, err = l.b.pool.Exec(ctx, `INSERT INTO skein_locks (name, holder) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, interrupt = NULL`, lk.name, lk.holder)
	if err != nil {
		l.unlockAdvisory(lk.name)
		return fmt.Errorf("postgres: lock '%s': %w", lk.name, err)
	}
	return nil
}

// ensureConn connects again when the lock connection broke (the
// watcher found it broken, or a query did: after a database restart).
// The locks held on a broken connection went with it: they are
// interrupted as lost, except taking, the lock being taken. The caller
// holds connMu.
func (l *locker) ensureConn(ctx context.Context, taking *lock) error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	if l.conn != nil {
		l.conn.Close(context.Background())
		l.conn = nil
		l.mu.Lock()
		lost := make(map[string]*lock, len(l.held))
		for _, lk := range l.held {
			if lk != taking {
				lost[lk.holder] = lk
			}
		}
		l.mu.Unlock()
		l.lose(lost)
	}
	return l.connect(ctx)
}

// unlockAdvisory releases the advisory lock of name (a broken connection
// released it already).
func (l *locker) unlockAdvisory(name string) error {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.conn == nil {
		return nil
	}
	_, err := l.conn.Exec(context.Background(), `SELECT pg_advisory_unlock(`+advisory("$1")+`)`, l.qualified(name))
	return err
}

func (l *locker) Interrupt(ctx context.Context, name, reason string) (bool, error) {
	var held bool
	err := l.b.pool.QueryRow(ctx, `SELECT `+heldSQL("$1"), l.qualified(name)).Scan(&held)
	if err == nil && held {
		_, err = l.b.pool.Exec(ctx, `UPDATE skein_locks SET interrupt = $2 WHERE name = $1 AND interrupt IS NULL`, name, reason)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: interrupt lock '%s': %w", name, err)
	}
	if !held {
		return false, nil
	}
	// A holder in this process learns of it at once.
	l.mu.Lock()
	lk := l.held[name]
	l.mu.Unlock()
	if lk != nil {
		lk.Interrupt(reason)
	}
	return true, nil
}

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
	_, err := l.b.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM skein_locks WHERE name = $1 AND holder = $2`, lk.name, lk.holder)
	if uerr := l.unlockAdvisory(lk.name); err == nil {
		err = uerr
	}
	if err != nil {
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
	// Release the advisory locks first, on the open connection (under
	// connMu, so no ping of the watcher is using it; stopping the watcher
	// can close the connection in the middle of one). The server frees a
	// closed connection's locks only once its backend process has exited,
	// after Close would return, so a TryLock right after could still find
	// them held.
	l.connMu.Lock()
	if l.conn != nil && !l.conn.IsClosed() {
		l.conn.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
	}
	l.connMu.Unlock()
	l.cancel()
	<-l.done
	var errs []error
	for _, lk := range held {
		lk.Interrupt(sessions.ReasonLockLost)
		_, err := l.b.pool.Exec(context.Background(), `DELETE FROM skein_locks WHERE name = $1 AND holder = $2`, lk.name, lk.holder)
		errs = append(errs, err)
	}
	l.connMu.Lock()
	if l.conn != nil {
		errs = append(errs, l.conn.Close(context.Background()))
	}
	l.connMu.Unlock()
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
		for _, lk := range l.held {
			held[lk.holder] = lk
			holders = append(holders, lk.holder)
		}
		l.mu.Unlock()
		if len(held) == 0 {
			continue
		}
		l.connMu.Lock()
		err := l.ensureConn(ctx, nil)
		if err == nil {
			if err = l.conn.Ping(ctx); err != nil && ctx.Err() == nil {
				// The advisory locks went with the connection.
				l.conn.Close(context.Background())
				l.conn = nil
			}
		}
		l.connMu.Unlock()
		if err != nil {
			l.lose(held)
			continue
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
