package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// stmter gives the form of a prepared statement that runs in a write
// transaction: a *sql.Tx's, or the write connection's (writeConn).
type stmter interface {
	StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeConn is one connection of the pool that the Backend keeps for the
// writes that follow its own previous write of a session (writeKnown),
// with the statements those run prepared on it. It runs BEGIN IMMEDIATE
// and COMMIT as statements of its own rather than through a sql.Tx,
// which starts a goroutine per transaction and wraps every statement
// anew: a third of the CPU time a commit of a few rows spends outside
// SQLite. Guarded by Backend.wmu.
type writeConn struct {
	conn                    *sql.Conn
	begin, commit, rollback *sql.Stmt
	stmts                   map[*sql.Stmt]*sql.Stmt // the Backend's statements, as prepared on conn
}

var _ stmter = (*writeConn)(nil)

// StmtContext returns stmt as prepared on the connection.
func (w *writeConn) StmtContext(_ context.Context, stmt *sql.Stmt) *sql.Stmt { return w.stmts[stmt] }

// ExecContext runs query on the connection.
func (w *writeConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return w.conn.ExecContext(ctx, query, args...)
}

// openWriteConn takes a connection from the pool and prepares the
// statements on it.
func (b *Backend) openWriteConn(ctx context.Context) (*writeConn, error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &writeConn{conn: conn, stmts: map[*sql.Stmt]*sql.Stmt{}}
	prepare := func(query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var s *sql.Stmt
		s, err = conn.PrepareContext(ctx, query)
		return s
	}
	w.begin, w.commit, w.rollback = prepare("BEGIN IMMEDIATE"), prepare("COMMIT"), prepare("ROLLBACK")
	for _, p := range b.stmts.list() {
		w.stmts[*p.dst] = prepare(p.query)
	}
	if err != nil {
		w.close(true)
		return nil, err
	}
	return w, nil
}

// writeConn returns the write connection, opening it if needed. The
// caller holds b.wmu.
func (b *Backend) writeConn(ctx context.Context) (*writeConn, error) {
	if b.wconn == nil {
		w, err := b.openWriteConn(ctx)
		if err != nil {
			return nil, err
		}
		b.wconn = w
	}
	return b.wconn, nil
}

// close closes the connection's statements and gives the connection
// back to the pool; with discard, it closes the connection instead (one
// that may be inside a transaction must not be reused).
func (w *writeConn) close(discard bool) error {
	for _, s := range []*sql.Stmt{w.begin, w.commit, w.rollback} {
		if s != nil {
			s.Close()
		}
	}
	for _, s := range w.stmts {
		if s != nil {
			s.Close()
		}
	}
	if discard {
		// Returning driver.ErrBadConn from Raw makes the pool close it.
		w.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	err := w.conn.Close()
	if errors.Is(err, sql.ErrConnDone) {
		err = nil
	}
	return err
}

// errNotKnown is writeKnown's refusal of a write it cannot make: nothing
// was written, and Write makes it in a transaction of its own.
var errNotKnown = errors.New("the session's state is not known")

// writeKnown is Write for a session whose state this Backend's previous
// write of it left (knownStates), on the write connection. It returns
// errNotKnown, having written nothing, when it cannot do the write: no
// known state at version base, a change that needs a state read in the
// transaction (a DropLast, a view leaving a base), or a session that
// another writer changed or deleted since (the write's row's key is
// taken, or its session is gone). also, unless it is nil, makes writes of
// its own in the transaction (see WriteRun).
func (b *Backend) writeKnown(ctx context.Context, id string, base int64, encoded []*rowstore.Change, also func(stmter) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx) // see write
	b.wmu.Lock()
	defer b.wmu.Unlock()
	h := b.known.get(id, base)
	if h == nil {
		return errNotKnown
	}
	p, err := rowstore.PlanWrite(id, &h.State, encoded, func(rowstore.View) (int64, error) { return 0, errNotKnown })
	switch {
	case errors.Is(err, errNotKnown) || (err == nil && len(p.Release) > 0):
		return errNotKnown
	case err != nil:
		return err
	}
	w, err := b.writeConn(ctx)
	if err != nil {
		return err
	}
	updated := h.updated
	if p.Update.Updated != nil {
		updated = *p.Update.Updated
	}
	// A write that changes the sessions row (its fields, or touched: see
	// insertWrite) needs a transaction of its two statements.
	// It carries the statements waiting for a write (see carry.go), after
	// its own.
	cs := b.takeCarried()
	if update, _ := b.rowUpdate(h, p); update == nil && also == nil && len(cs) == 0 && !p.Update.SetMetadata && rowstore.Touched(updated) == h.touched {
		return b.insertAlone(ctx, w, id, h, p, base)
	}
	if _, err := w.begin.ExecContext(ctx); err != nil {
		b.putBack(cs)
		return b.dropWriteConn(err)
	}
	b.begun()
	after, err := b.applyPlan(ctx, w, h, p, base)
	if err == nil && also != nil {
		err = also(w)
	}
	if err == nil {
		runCarried(ctx, w, cs)
		if _, err = w.commit.ExecContext(ctx); err != nil {
			err = b.dropWriteConn(err)
			endCarried(cs, err)
			return sessions.IDError(id, err)
		}
		b.known.put(id, after)
		b.committed(ctx)
		endCarried(cs, nil)
		return nil
	}
	b.putBack(cs)
	if _, rerr := w.rollback.ExecContext(ctx); rerr != nil {
		b.dropWriteConn(rerr)
	}
	if isConstraint(err) || errors.Is(err, errNoRow) {
		return errNotKnown // another writer was there, or deleted the session
	}
	if errors.Is(err, sessions.ErrRunNotFound) {
		return err // also's: the run is not the session's
	}
	return sessions.IDError(id, err)
}

// insertAlone is writeKnown for a write that is only its row (it changes
// none of the session's own fields): the INSERT runs on its own, as its
// own transaction, sparing the two statements that begin and commit one.
// SQLite waits for another process's write lock (busy_timeout) as it
// does for BEGIN IMMEDIATE: the statement starts its transaction.
func (b *Backend) insertAlone(ctx context.Context, w *writeConn, id string, h *head, p *rowstore.Plan, base int64) error {
	b.begun()
	after, err := b.insertPlanned(ctx, w, h, p, base)
	switch {
	case err == nil:
		b.known.put(id, after)
		b.committed(ctx)
		return nil
	case isConstraint(err) || errors.Is(err, errNoRow):
		return errNotKnown // another writer was there, or deleted the session
	case fromDatabase(err):
		return sessions.IDError(id, b.dropWriteConn(err))
	}
	return sessions.IDError(id, err) // refused before it ran
}

// fromDatabase reports whether err came from SQLite or the connection,
// not from checking the write before it ran.
func fromDatabase(err error) bool {
	var e *modernc.Error
	return errors.As(err, &e) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// isConstraint reports whether err is SQLite's refusal of a row that
// breaks a constraint (a key taken, a foreign key without its row).
func isConstraint(err error) bool {
	var e *modernc.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// dropWriteConn discards the write connection after err, which it
// returns: the next writeKnown opens another.
func (b *Backend) dropWriteConn(err error) error {
	b.wconn.close(true)
	b.wconn = nil
	return err
}
