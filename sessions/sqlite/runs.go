package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

var (
	_ sessions.RunBackend      = (*Backend)(nil)
	_ sessions.RunWriteBackend = (*Backend)(nil)
)

// CreateRun stores a new run record and its first steps, on the write
// connection with prepared statements as UpdateRun: one INSERT that
// refuses a taken id, and an INSERT per step, in one transaction.
func (b *Backend) CreateRun(ctx context.Context, rec *sessions.RunRecord) error {
	created, err := rowstore.EncodeTime(rec.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := rowstore.EncodeTime(rec.UpdatedAt)
	if err != nil {
		return err
	}
	return b.runWrite(ctx, true, func(ctx context.Context, w *writeConn) error {
		var rid int64
		err := w.StmtContext(ctx, b.stmts.runCreate).QueryRowContext(ctx, rec.ID, rec.Workflow, rec.Fingerprint, rec.Status,
			created, updated, rowstore.EncodeRun(b.key, rowstore.FieldRunHead, rec.Head), len(rec.Steps)).Scan(&rid)
		if errors.Is(err, sql.ErrNoRows) {
			return sessions.ErrRunExists
		}
		if err != nil {
			return err
		}
		b.inserted(len(rec.Head))
		return b.insertSteps(ctx, w, rid, 0, rec.Steps)
	})
}

// insertSteps stores steps as run rid's from position from on.
func (b *Backend) insertSteps(ctx context.Context, tx stmter, rid int64, from int, steps [][]byte) error {
	if len(steps) == 0 {
		return nil
	}
	insert := tx.StmtContext(ctx, b.stmts.runStep)
	n := 0
	for i, s := range steps {
		if _, err := insert.ExecContext(ctx, rid, from+i, rowstore.EncodeRun(b.key, rowstore.FieldRunStep, s)); err != nil {
			return err
		}
		n += len(s)
	}
	b.inserted(n)
	return nil
}

// onWriteConn runs fn, a read of a statement or two, on the write
// connection (see writeConn), which it opens if needed, between two
// writes; when statements wait to be carried (carry.go), in a write
// transaction that carries them. fn's context is not cancelled (see
// write).
func (b *Backend) onWriteConn(ctx context.Context, fn func(ctx context.Context, w *writeConn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	b.wmu.Lock()
	defer b.wmu.Unlock()
	w, err := b.writeConn(ctx)
	if err != nil {
		return err
	}
	cs := b.takeCarried()
	if len(cs) > 0 {
		if _, err := w.begin.ExecContext(ctx); err != nil {
			b.putBack(cs)
			return b.dropWriteConn(err)
		}
		b.begun()
		runCarried(ctx, w, cs)
	}
	err = fn(ctx, w)
	if len(cs) > 0 {
		// fn only reads: its error is its own, and the carried
		// statements commit regardless.
		_, cerr := w.commit.ExecContext(ctx)
		if cerr != nil {
			cerr = b.dropWriteConn(cerr)
		} else {
			b.committed(ctx)
		}
		endCarried(cs, cerr)
		if cerr != nil {
			return cerr
		}
	}
	if err != nil && fromDatabase(err) && b.wconn != nil {
		return b.dropWriteConn(err)
	}
	return err
}

// runWrite runs fn on the write connection (see writeConn), which it
// opens if needed: in a transaction with tx, else alone (a single
// statement, which SQLite runs as its own transaction). fn's context is
// not cancelled (see write).
func (b *Backend) runWrite(ctx context.Context, tx bool, fn func(ctx context.Context, w *writeConn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx) // see write
	b.wmu.Lock()
	defer b.wmu.Unlock()
	w, err := b.writeConn(ctx)
	if err != nil {
		return err
	}
	if !tx {
		b.begun()
		if err := fn(ctx, w); err != nil {
			if fromDatabase(err) {
				return b.dropWriteConn(err)
			}
			return err
		}
		b.committed(ctx)
		return nil
	}
	if _, err := w.begin.ExecContext(ctx); err != nil {
		return b.dropWriteConn(err)
	}
	b.begun()
	err = fn(ctx, w)
	if err == nil {
		if _, err = w.commit.ExecContext(ctx); err == nil {
			b.committed(ctx)
			return nil
		}
	}
	if _, rerr := w.rollback.ExecContext(ctx); rerr != nil {
		b.dropWriteConn(rerr)
	}
	return err
}

// UpdateRun writes the run's new status and header and appends steps.
// A workflow writes it as its stages end, so it runs on the write
// connection with prepared statements (see writeConn): one UPDATE that
// also counts the steps, and an INSERT per step, in one transaction; an
// update without steps is its UPDATE alone.
func (b *Backend) UpdateRun(ctx context.Context, id string, u *sessions.RunUpdate) error {
	updated, err := rowstore.EncodeTime(u.UpdatedAt)
	if err != nil {
		return err
	}
	return b.runWrite(ctx, len(u.Steps) > 0, func(ctx context.Context, w *writeConn) error {
		return b.updateRun(ctx, w, id, updated, u)
	})
}

// updateRun applies u to run id in the write transaction tx (updated is
// u.UpdatedAt encoded): the runs row's UPDATE, which counts the steps,
// and an INSERT per step.
func (b *Backend) updateRun(ctx context.Context, tx stmter, id string, updated int64, u *sessions.RunUpdate) error {
	var rid int64
	var steps int
	err := tx.StmtContext(ctx, b.stmts.runUpdate).QueryRowContext(ctx, u.Status, updated,
		rowstore.EncodeRun(b.key, rowstore.FieldRunHead, u.Head), len(u.Steps), id).
		Scan(&rid, &steps)
	if errors.Is(err, sql.ErrNoRows) {
		return sessions.ErrRunNotFound
	}
	if err != nil {
		return err
	}
	b.inserted(len(u.Head))
	return b.insertSteps(ctx, tx, rid, steps-len(u.Steps), u.Steps)
}

// LoadRun returns a run record with its steps.
func (b *Backend) LoadRun(ctx context.Context, id string) (*sessions.RunRecord, error) {
	rec := &sessions.RunRecord{}
	err := b.read(ctx, func(tx *sql.Tx) error {
		var rid, created, updated int64
		var head string
		err := tx.QueryRowContext(ctx, `SELECT rid, id, workflow, fingerprint, status, created_at, updated_at, head FROM runs WHERE id = ?`, id).
			Scan(&rid, &rec.ID, &rec.Workflow, &rec.Fingerprint, &rec.Status, &created, &updated, &head)
		if errors.Is(err, sql.ErrNoRows) {
			return sessions.ErrRunNotFound
		}
		if err != nil {
			return err
		}
		rec.CreatedAt, rec.UpdatedAt = rowstore.DecodeTime(created), rowstore.DecodeTime(updated)
		if rec.Head, err = rowstore.DecodeRun(b.key, rowstore.FieldRunHead, id, "head", []byte(head)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT body FROM run_steps WHERE rid = ? ORDER BY pos", rid)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var body string
			if err := rows.Scan(&body); err != nil {
				return err
			}
			step, err := rowstore.DecodeRun(b.key, rowstore.FieldRunStep, id, fmt.Sprintf("step %d", len(rec.Steps)), []byte(body))
			if err != nil {
				return err
			}
			rec.Steps = append(rec.Steps, step)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}
