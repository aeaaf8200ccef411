package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// loadState reads the state of session id (sessions.ErrNotFound).
func (b *Backend) loadState(ctx context.Context, tx *sql.Tx, id string) (*rowstore.State, error) {
	var st rowstore.State
	var base sql.NullInt64
	err := tx.StmtContext(ctx, b.stmts.state).QueryRowContext(ctx, id).
		Scan(&st.Row, &st.Version, &st.Length, &base, &st.View.BaseFrom, &st.View.BaseTo, &st.View.OwnFrom)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, sessions.IDError(id, err)
	}
	st.View.Base = base.Int64
	return &st, nil
}

// checkParentChain refuses, in the transaction that inserts it, a new
// session whose stored parents lead back to it (sessions.ErrCycle).
func checkParentChain(ctx context.Context, tx *sql.Tx, rec *sessions.Record) error {
	return sessions.CheckParentChain(rec.ID, rec.ParentID, func(id string) (string, bool, error) {
		var parent sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT parent_id FROM sessions WHERE id = ?`, id).Scan(&parent)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		if err != nil {
			return "", false, sessions.IDError(rec.ID, err)
		}
		return parent.String, true, nil
	})
}

// insertSession stores rec's own fields with the current view v of n
// messages and returns the new row's sid (sessions.ErrExists).
func insertSession(ctx context.Context, tx *sql.Tx, rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View, n int64) (int64, error) {
	var sid int64
	err := tx.QueryRowContext(ctx, `INSERT INTO sessions (id, status, created_at, updated_at, summary, metadata,
			parent_id, branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length,
			title, first_prompt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING sid`,
		rec.ID, row.Status, row.Created, row.Updated, row.Summary, row.Metadata,
		row.ParentID, row.Branched, rec.Turns, rec.MaxTurns, rec.Version,
		v.BaseArg(), v.BaseFrom, v.BaseTo, v.OwnFrom, n, row.Title, row.FirstPrompt).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, sessions.IDError(rec.ID, sessions.ErrExists)
	}
	if err != nil {
		return 0, sessions.IDError(rec.ID, err)
	}
	return sid, nil
}

// insertEvents appends events to session sid's log.
func (b *Backend) insertEvents(ctx context.Context, tx stmter, sid int64, events []rowstore.EventRow) error {
	if len(events) == 0 {
		return nil
	}
	stmt := tx.StmtContext(ctx, b.stmts.insertEvent)
	for _, e := range events {
		if _, err := stmt.ExecContext(ctx, sid, e.Seq, e.Type, e.Time, e.CorrID, e.Data, e.Pos); err != nil {
			return fmt.Errorf("event %d: %w", e.Seq, err)
		}
		if e.Data != nil {
			b.inserted(len(*e.Data))
		}
	}
	return nil
}

// Create stores a new session with its messages and events
// (sessions.ErrExists if the id is taken). rec.ChildIDs must be empty:
// children are recorded by Fork. rec.ParentID is stored as given.
func (b *Backend) Create(ctx context.Context, rec *sessions.Record) error {
	return b.CreateWithHistory(ctx, rec, nil)
}

// CreateWithHistory is Create that also records appended: the message
// each of some "message" events of rec.Events appended, by seq, stored
// as message rows before the current ones (sessions.HistoryBackend).
func (b *Backend) CreateWithHistory(ctx context.Context, rec *sessions.Record, appended map[int64]sessions.Message) error {
	c, err := rowstore.EncodeCreate(rec, appended)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		if err := checkParentChain(ctx, tx, rec); err != nil {
			return err
		}
		sid, err := insertSession(ctx, tx, rec, c.Row, c.State.View, c.State.Length)
		if err != nil {
			return err
		}
		if err := b.insertMessageRows(ctx, tx, sid, c.Rows); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		if err := b.insertEvents(ctx, tx, sid, c.Events); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		return nil
	})
}

// Write applies changes to session id, in order, if its stored version is
// base, in one transaction, and bumps the version once per change
// (sessions.ErrNotFound, sessions.ErrConflict). A DropFirst or DropLast
// beyond the message count fails with nothing written. However many
// changes there are, the session's row is updated once and each message
// and event is one row: a loop step's changes cost one commit.
//
// A write that follows this Backend's previous write of the session (the
// usual case: a session has one writer at a time) does not read the
// session's state first: it takes the state that write left (see
// knownStates), and the update of the session's row, made first and
// conditional on its sid and version, checks it (writeKnown); when
// another writer has been there meanwhile, the write starts over and
// reads the row.
func (b *Backend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	encoded, err := rowstore.EncodeChanges(id, changes)
	if err != nil {
		return err
	}
	dropsLast := false
	for _, ch := range changes {
		dropsLast = dropsLast || ch.DropLast > 0
	}
	if !dropsLast {
		if err := b.writeKnown(ctx, id, base, encoded); !errors.Is(err, errNotKnown) {
			return err
		}
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		st, err := b.loadState(ctx, tx, id)
		if err != nil {
			return err
		}
		if st.Version != base {
			return sessions.IDError(id, sessions.ErrConflict)
		}
		p, err := rowstore.PlanWrite(id, st, encoded, func(v rowstore.View) (int64, error) { return freeze(ctx, tx, st.Row, v) })
		if err != nil {
			return err
		}
		updated, err := b.updateRow(ctx, tx, st, p, base)
		if err == nil && !updated {
			err = errors.New("the session's row was not updated")
		}
		if err != nil {
			return sessions.IDError(id, err)
		}
		if err := b.insertMessageRows(ctx, tx, st.Row, p.Rows); err != nil {
			return sessions.IDError(id, err)
		}
		if err := b.insertEvents(ctx, tx, st.Row, p.Events); err != nil {
			return sessions.IDError(id, err)
		}
		for _, vid := range p.Release {
			if err := release(ctx, tx, vid); err != nil {
				return err
			}
		}
		// Should the commit fail, write forgets this state.
		b.known.put(id, &rowstore.State{Row: st.Row, Version: base + int64(p.Changes), Length: p.Length, View: p.View})
		return nil
	})
}

// updateRow updates session st's row as p says, bumping its version by
// the number of changes, if the row's sid and version are st's and base:
// it reports whether they were.
func (b *Backend) updateRow(ctx context.Context, tx stmter, st *rowstore.State, p *rowstore.Plan, base int64) (bool, error) {
	v, u := p.View, &p.Update
	args := []any{p.Changes, v.BaseFrom, v.BaseTo, v.OwnFrom, p.Length,
		u.SetSummary, u.Summary, u.Turns,
		u.MaxTurns, u.MaxTurns, u.SetTitle, u.Title, u.SetMetadata, u.Metadata,
		u.SetFirstPrompt, u.FirstPrompt, u.Updated,
		st.Row, base}
	update := b.stmts.updateLean
	if u.Status != nil || v.Base != st.View.Base {
		update, args = b.stmts.update, append([]any{v.BaseArg(), u.Status}, args...)
	}
	res, err := tx.StmtContext(ctx, update).ExecContext(ctx, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// oneRow checks that an UPDATE changed exactly one row.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("updated %d rows, want 1", n)
	}
	return nil
}

// Fork creates spec.Dst sharing the first KeepFirst messages of spec.Src
// and records the fork on the source, writing O(1) rows whatever the
// length (see the package doc). Dst's Messages and ChildIDs must be empty
// and its ParentID empty or Src; the stored ParentID is Src.
func (b *Backend) Fork(ctx context.Context, spec *sessions.ForkSpec) error {
	f, err := rowstore.EncodeFork(spec)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error { return f.Apply(forkTx{ctx, b, tx}) })
}

// forkTx is a write transaction as rowstore.Fork.Apply uses it.
type forkTx struct {
	ctx context.Context
	b   *Backend
	tx  *sql.Tx
}

func (t forkTx) LockedState(id string) (*rowstore.State, error) {
	return t.b.loadState(t.ctx, t.tx, id)
}
func (t forkTx) Exists(id string) (bool, error) { return exists(t.ctx, t.tx, id) }
func (t forkTx) Freeze(sid int64, v rowstore.View) (int64, error) {
	return freeze(t.ctx, t.tx, sid, v)
}

func (t forkTx) InsertSession(rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View, n int64) (int64, error) {
	return insertSession(t.ctx, t.tx, rec, row, v, n)
}

func (t forkTx) InsertEvents(sid int64, events []rowstore.EventRow) error {
	return t.b.insertEvents(t.ctx, t.tx, sid, events)
}

func (t forkTx) Bump(sid, version int64, updated *int64) error {
	res, err := t.tx.ExecContext(t.ctx, `UPDATE sessions SET version = version + 1, updated_at = coalesce(?, updated_at)
		WHERE sid = ? AND version = ?`, updated, sid, version)
	return oneRow(res, err)
}
