package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/storekey"
)

var _ sessions.RunBackend = (*Backend)(nil)

// CreateRun stores a new run record and its first steps.
func (b *Backend) CreateRun(ctx context.Context, rec *sessions.RunRecord) error {
	created, err := rowstore.EncodeTime(rec.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := rowstore.EncodeTime(rec.UpdatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE id = ?", rec.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return sessions.ErrRunExists
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at, head, steps)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0)`, rec.ID, rec.Workflow, rec.Fingerprint, rec.Status, created, updated,
			rowstore.EncodeRun(b.key, rowstore.FieldRunHead, rec.Head))
		if err != nil {
			return err
		}
		rid, err := res.LastInsertId()
		if err != nil {
			return err
		}
		return appendSteps(ctx, tx, b.key, rid, 0, rec.Steps)
	})
}

// appendSteps stores steps as run rid's from position from on, sealed
// with k unless it is nil.
func appendSteps(ctx context.Context, tx *sql.Tx, k *storekey.Key, rid int64, from int, steps [][]byte) error {
	for i, s := range steps {
		if _, err := tx.ExecContext(ctx, "INSERT INTO run_steps (rid, pos, body) VALUES (?, ?, ?)", rid, from+i,
			rowstore.EncodeRun(k, rowstore.FieldRunStep, s)); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "UPDATE runs SET steps = ? WHERE rid = ?", from+len(steps), rid)
	return err
}

// UpdateRun writes the run's new status and header and appends steps.
// A workflow writes it after every stage, so it runs on the write
// connection with prepared statements (see writeConn): one UPDATE that
// also counts the steps, and an INSERT per step, in one transaction; an
// update without steps is its UPDATE alone.
func (b *Backend) UpdateRun(ctx context.Context, id string, u *sessions.RunUpdate) error {
	updated, err := rowstore.EncodeTime(u.UpdatedAt)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx) // see write
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if b.wconn == nil {
		if b.wconn, err = b.openWriteConn(ctx); err != nil {
			return err
		}
	}
	w := b.wconn
	b.begun()
	update := func() (int64, int, error) {
		var rid int64
		var steps int
		err := w.StmtContext(ctx, b.stmts.runUpdate).QueryRowContext(ctx, u.Status, updated,
			rowstore.EncodeRun(b.key, rowstore.FieldRunHead, u.Head), len(u.Steps), id).
			Scan(&rid, &steps)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, sessions.ErrRunNotFound
		}
		return rid, steps, err
	}
	if len(u.Steps) == 0 {
		if _, _, err := update(); err != nil {
			if fromDatabase(err) {
				return b.dropWriteConn(err)
			}
			return err
		}
		b.inserted(len(u.Head))
		b.committed(ctx)
		return nil
	}
	if _, err := w.begin.ExecContext(ctx); err != nil {
		return b.dropWriteConn(err)
	}
	err = func() error {
		rid, steps, err := update()
		if err != nil {
			return err
		}
		n := len(u.Head)
		insert := w.StmtContext(ctx, b.stmts.runStep)
		for i, s := range u.Steps {
			if _, err := insert.ExecContext(ctx, rid, steps-len(u.Steps)+i, rowstore.EncodeRun(b.key, rowstore.FieldRunStep, s)); err != nil {
				return err
			}
			n += len(s)
		}
		b.inserted(n)
		_, err = w.commit.ExecContext(ctx)
		return err
	}()
	if err == nil {
		b.committed(ctx)
		return nil
	}
	if _, rerr := w.rollback.ExecContext(ctx); rerr != nil {
		b.dropWriteConn(rerr)
	}
	return err
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
