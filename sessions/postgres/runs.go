package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/storekey"
)

// CreateRun stores a new run record and its first steps
// (sessions.ErrRunExists).
func (b *Backend) CreateRun(ctx context.Context, rec *sessions.RunRecord) error {
	created, err := rowstore.EncodeTime(rec.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := rowstore.EncodeTime(rec.UpdatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx pgx.Tx) error {
		var rid int64
		err := tx.QueryRow(ctx, `INSERT INTO skein_runs (id, workflow, fingerprint, status, created_at, updated_at, head, steps)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0) ON CONFLICT (id) DO NOTHING RETURNING rid`,
			rec.ID, rec.Workflow, rec.Fingerprint, rec.Status, created, updated, rowstore.EncodeRun(b.key, rowstore.FieldRunHead, rec.Head)).Scan(&rid)
		if errNoRows(err) {
			return sessions.ErrRunExists
		}
		if err != nil {
			return err
		}
		return appendSteps(ctx, tx, b.key, rid, 0, rec.Steps)
	})
}

// appendSteps stores steps as run rid's from position from on, sealed
// with k unless it is nil.
func appendSteps(ctx context.Context, tx pgx.Tx, k *storekey.Key, rid int64, from int, steps [][]byte) error {
	bodies := make([]string, len(steps))
	for i, s := range steps {
		bodies[i] = rowstore.EncodeRun(k, rowstore.FieldRunStep, s)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO skein_run_steps (rid, pos, body)
		SELECT $1, $2 + ord - 1, body FROM unnest($3::text[]) WITH ORDINALITY AS s (body, ord)`, rid, from, bodies); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "UPDATE skein_runs SET steps = $1 WHERE rid = $2", from+len(steps), rid)
	return err
}

// UpdateRun writes the run's new status and header and appends steps
// (sessions.ErrRunNotFound).
func (b *Backend) UpdateRun(ctx context.Context, id string, u *sessions.RunUpdate) error {
	updated, err := rowstore.EncodeTime(u.UpdatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx pgx.Tx) error {
		var rid int64
		var steps int
		err := tx.QueryRow(ctx, `UPDATE skein_runs SET status = $1, updated_at = $2, head = $3 WHERE id = $4 RETURNING rid, steps`,
			u.Status, updated, rowstore.EncodeRun(b.key, rowstore.FieldRunHead, u.Head), id).Scan(&rid, &steps)
		if errNoRows(err) {
			return sessions.ErrRunNotFound
		}
		if err != nil || len(u.Steps) == 0 {
			return err
		}
		return appendSteps(ctx, tx, b.key, rid, steps, u.Steps)
	})
}

// LoadRun returns a run record with its steps (sessions.ErrRunNotFound).
func (b *Backend) LoadRun(ctx context.Context, id string) (*sessions.RunRecord, error) {
	rec := &sessions.RunRecord{}
	err := b.read(ctx, func(tx pgx.Tx) error {
		var rid, created, updated int64
		var head string
		err := tx.QueryRow(ctx, `SELECT rid, id, workflow, fingerprint, status, created_at, updated_at, head FROM skein_runs WHERE id = $1`, id).
			Scan(&rid, &rec.ID, &rec.Workflow, &rec.Fingerprint, &rec.Status, &created, &updated, &head)
		if errNoRows(err) {
			return sessions.ErrRunNotFound
		}
		if err != nil {
			return err
		}
		rec.CreatedAt, rec.UpdatedAt = rowstore.DecodeTime(created), rowstore.DecodeTime(updated)
		if rec.Head, err = rowstore.DecodeRun(b.key, rowstore.FieldRunHead, id, "head", []byte(head)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT body FROM skein_run_steps WHERE rid = $1 ORDER BY pos", rid)
		if err != nil {
			return err
		}
		if rec.Steps, err = pgx.CollectRows(rows, pgx.RowTo[[]byte]); err != nil {
			return err
		}
		for i, s := range rec.Steps {
			if rec.Steps[i], err = rowstore.DecodeRun(b.key, rowstore.FieldRunStep, id, fmt.Sprintf("step %d", i), s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}
