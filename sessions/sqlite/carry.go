package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Statements carried by other writes. A lock taken or released is one
// statement (see locks.go), and a commit of its own costs far more than
// the statement: the log's locks taken and released (a system call
// each), the page written to the log. So such a statement waits, up to
// carryWait, for the Backend's next session write (writeKnown), which
// runs it in its own transaction after its own statements; if none
// comes, the statement commits on its own, with every other statement
// waiting then. Either way it returns once the transaction that ran it
// has committed: a lock released is free for every process when
// Unlock returns, as before.

// carryWait is how long a carried statement waits for a write to carry
// it before it commits on its own. A served turn's writes come every
// few hundred microseconds when turns run.
const carryWait = time.Millisecond

// carried is one statement waiting to be carried.
type carried struct {
	stmt *sql.Stmt
	args []any
	// then, unless nil, runs right after the statement when it
	// succeeded (n: the rows it changed), in its transaction.
	then func(ctx context.Context, w *writeConn, n int64)
	n    int64 // the rows it changed
	err  error
	done chan struct{} // closed when its transaction has ended
}

// execCarried runs one of the Backend's prepared statements on the write
// connection in the transaction of another write, or of its own after
// carryWait (see above), and returns how many rows it changed once that
// transaction has committed. Once queued it runs whatever ctx does
// (see write).
func (b *Backend) execCarried(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	return b.execCarriedThen(ctx, nil, stmt, args...)
}

// execCarriedThen is execCarried with then run right after the
// statement when it succeeded, on the write connection, in its
// transaction (a read, such as a version read after a lock is taken).
func (b *Backend) execCarriedThen(ctx context.Context, then func(ctx context.Context, w *writeConn, n int64), stmt *sql.Stmt, args ...any) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := &carried{stmt: stmt, args: args, then: then, done: make(chan struct{})}
	b.cmu.Lock()
	b.carry = append(b.carry, c)
	b.cmu.Unlock()
	t := time.NewTimer(carryWait)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return c.n, c.err
		case <-t.C:
			b.flushCarried(ctx)
			t.Reset(carryWait)
		}
	}
}

// takeCarried returns the statements waiting to be carried and clears
// the list. The caller holds b.wmu, runs them in its transaction
// (runCarried) and ends them (endCarried), or gives them back
// (putBack) before it releases b.wmu.
func (b *Backend) takeCarried() []*carried {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	cs := b.carry
	b.carry = nil
	return cs
}

// putBack returns statements taken and not run to the head of the list.
func (b *Backend) putBack(cs []*carried) {
	if len(cs) == 0 {
		return
	}
	b.cmu.Lock()
	b.carry = append(cs, b.carry...)
	b.cmu.Unlock()
}

// runCarried runs cs on w, in the transaction in progress, recording
// each one's result.
func runCarried(ctx context.Context, w *writeConn, cs []*carried) {
	for _, c := range cs {
		res, err := w.StmtContext(ctx, c.stmt).ExecContext(ctx, c.args...)
		if err == nil {
			c.n, err = res.RowsAffected()
		}
		c.err = err
		if err == nil && c.then != nil {
			c.then(ctx, w, c.n)
		}
	}
}

// endCarried tells the statements of cs that their transaction ended:
// err is its commit's error (nil: committed).
func endCarried(cs []*carried, err error) {
	for _, c := range cs {
		if err != nil && c.err == nil {
			c.err = err
		}
		close(c.done)
	}
}

// flushCarried commits the statements waiting to be carried in a
// transaction of their own (a statement alone is its own).
func (b *Backend) flushCarried(ctx context.Context) {
	ctx = context.WithoutCancel(ctx) // see write
	b.wmu.Lock()
	defer b.wmu.Unlock()
	cs := b.takeCarried()
	if len(cs) == 0 {
		return // carried meanwhile
	}
	w, err := b.writeConn(ctx)
	if err != nil {
		endCarried(cs, err)
		return
	}
	b.begun()
	if len(cs) == 1 {
		runCarried(ctx, w, cs)
		switch err := cs[0].err; {
		case err == nil:
			b.committed(ctx)
		case fromDatabase(err):
			b.dropWriteConn(err)
		}
		endCarried(cs, nil)
		return
	}
	if _, err := w.begin.ExecContext(ctx); err != nil {
		endCarried(cs, b.dropWriteConn(err))
		return
	}
	runCarried(ctx, w, cs)
	if _, err := w.commit.ExecContext(ctx); err != nil {
		endCarried(cs, b.dropWriteConn(err))
		return
	}
	b.committed(ctx)
	endCarried(cs, nil)
}
