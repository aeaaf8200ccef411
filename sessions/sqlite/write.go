package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
)

// loadState reads the write state of session id (sessions.ErrNotFound).
func (b *Backend) loadState(ctx context.Context, tx *sql.Tx, id string) (*head, error) {
	var h head
	var base sql.NullInt64
	err := tx.StmtContext(ctx, b.stmts.state).QueryRowContext(ctx, id).
		Scan(&h.Row, &h.Version, &h.Length, &base, &h.View.BaseFrom, &h.View.BaseTo, &h.View.OwnFrom, &h.turns, &h.updated, &h.seqEnd, &h.touched)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, sessions.IDError(id, err)
	}
	h.View.Base = base.Int64
	return &h, nil
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

// insertSession stores rec's own fields with the base of its view v
// (the rest of its state goes in its first writes row, see
// insertCreated) and returns the new row's sid (sessions.ErrExists).
func insertSession(ctx context.Context, tx *sql.Tx, rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View) (int64, error) {
	var sid int64
	err := tx.QueryRowContext(ctx, `INSERT INTO sessions (id, status, created_at, summary, metadata,
			parent_id, branched_at, max_turns, base, title, first_prompt,
			summary_crc, metadata_crc, title_crc, first_prompt_crc, touched, repo_id, agent)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING sid`,
		rec.ID, row.Status, row.Created, row.Summary.Text, row.Metadata.Text,
		row.ParentID, row.Branched, rec.MaxTurns, v.BaseArg(), row.Title.Text, row.FirstPrompt.Text,
		row.Summary.Sum, row.Metadata.Sum, row.Title.Sum, row.FirstPrompt.Sum, rowstore.Touched(row.Updated),
		row.Labels.RepoID, row.Labels.Agent).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, sessions.IDError(rec.ID, sessions.ErrExists)
	}
	if err != nil {
		return 0, sessions.IDError(rec.ID, err)
	}
	return sid, nil
}

// createdBase is the base of a session's first writes row, the one its
// creation stores: before every version.
const createdBase = -1

// insertCreated stores the first writes row of new session sid, whose
// state is h: its messages rows and events.
func (b *Backend) insertCreated(ctx context.Context, tx stmter, h *head, rows []rowstore.MessageRow, events []rowstore.EventRow) error {
	h.seqEnd = 1
	if len(events) > 0 {
		h.seqEnd = events[0].Seq
	}
	return b.insertWrite(ctx, tx, h, createdBase, h.View.Next(h.Length), rows, events)
}

// insertWrite inserts the writes row of session h.Row made on version
// base, leaving state h: message rows from position pos on (the rows
// themselves, or the next free position when there are none) and events.
// It sets h.seqEnd past the events. It fails when the row's key is taken
// (another write was made on that version: a constraint error) and when
// the session is not stored (oneRow's error: no row inserted).
func (b *Backend) insertWrite(ctx context.Context, tx stmter, h *head, base, pos int64, rows []rowstore.MessageRow, events []rowstore.EventRow) error {
	if len(rows) > 0 {
		pos = rows[0].Pos
	}
	msgs, err := encodeMessages(nil, rows)
	if err != nil {
		return err
	}
	seq := h.seqEnd // the row's first event's, or the next one's
	if len(events) > 0 {
		if events[0].Seq < h.seqEnd {
			return fmt.Errorf("event seq %d is not after the session's last, %d", events[0].Seq, h.seqEnd-1)
		}
		seq = events[0].Seq
	}
	evs, err := encodeEvents(nil, seq, events)
	if err != nil {
		return err
	}
	if len(events) > 0 {
		h.seqEnd = events[len(events)-1].Seq + 1
	}
	key, err := writeKey(h.Row, base)
	if err != nil {
		return err
	}
	if t := rowstore.Touched(h.updated); t != h.touched {
		if err := oneRow(tx.StmtContext(ctx, b.stmts.touch).ExecContext(ctx, t, h.Row)); err != nil {
			return err
		}
		h.touched = t
	}
	v := h.View
	res, err := tx.StmtContext(ctx, b.stmts.insertWrite).ExecContext(ctx, key, h.Version, h.Length,
		v.BaseFrom, v.BaseTo, v.OwnFrom, h.turns, h.updated, pos, pos+int64(len(rows)), seq, h.seqEnd, msgs, evs, eventsSum(evs), h.Row)
	if err := oneRow(res, err); err != nil {
		return err
	}
	b.inserted(len(msgs) + len(evs))
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
func (b *Backend) CreateWithHistory(ctx context.Context, rec *sessions.Record, appended map[int64]message.Message) error {
	c, err := rowstore.EncodeCreate(b.key, rec, appended)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		if err := checkParentChain(ctx, tx, rec); err != nil {
			return err
		}
		sid, err := insertSession(ctx, tx, rec, c.Row, c.State.View)
		if err != nil {
			return err
		}
		h := &head{State: c.State, turns: int64(rec.Turns), updated: c.Row.Updated, touched: rowstore.Touched(c.Row.Updated)}
		h.Row = sid
		if err := b.insertCreated(ctx, tx, h, c.Rows, c.Events); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		// The session's first write need not read what this one
		// stored (should the commit fail, write forgets it).
		b.known.put(rec.ID, h)
		return nil
	})
}

// Write applies changes to session id, in order, if its stored version is
// base, in one transaction, and bumps the version once per change
// (sessions.ErrNotFound, sessions.ErrConflict). A DropFirst or DropLast
// beyond the message count fails with nothing written. However many
// changes there are, they are one row of table writes (and an update of
// the sessions row only when they change its own fields): a loop step's
// changes cost one commit of about one page.
//
// A write that follows this Backend's previous write of the session (the
// usual case: a session has one writer at a time) does not read the
// session's state first: it takes the state that write left (see
// knownStates), and the row's key, the version the write was made on,
// checks it (writeKnown); when another writer has been there meanwhile,
// the write starts over and reads the state.
func (b *Backend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	return b.writeWith(ctx, id, base, nil, changes)
}

// WriteRun is Write that also applies u to the run runID in the same
// transaction (sessions.RunWriteBackend): a workflow stage's end, its
// stage_end event and its step, is one commit.
func (b *Backend) WriteRun(ctx context.Context, id string, base int64, runID string, u *sessions.RunUpdate, changes ...*sessions.Change) error {
	updated, err := rowstore.EncodeTime(u.UpdatedAt)
	if err != nil {
		return err
	}
	return b.writeWith(ctx, id, base, func(tx stmter) error { return b.updateRun(ctx, tx, runID, updated, u) }, changes)
}

// writeWith is Write, with also (unless it is nil) also's writes in the
// same transaction.
func (b *Backend) writeWith(ctx context.Context, id string, base int64, also func(stmter) error, changes []*sessions.Change) error {
	encoded, err := rowstore.EncodeChanges(b.key, id, changes)
	if err != nil {
		return err
	}
	dropsLast := false
	for _, ch := range changes {
		dropsLast = dropsLast || ch.DropLast > 0
	}
	if !dropsLast {
		if err := b.writeKnown(ctx, id, base, encoded, also); !errors.Is(err, errNotKnown) {
			return err
		}
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		h, err := b.loadState(ctx, tx, id)
		if err != nil {
			return err
		}
		if h.Version != base {
			return sessions.IDError(id, sessions.ErrConflict)
		}
		p, err := rowstore.PlanWrite(id, &h.State, encoded, func(v rowstore.View) (int64, error) { return freeze(ctx, tx, h.Row, v) })
		if err != nil {
			return err
		}
		after, err := b.applyPlan(ctx, tx, h, p, base)
		if err != nil {
			return sessions.IDError(id, err)
		}
		for _, vid := range p.Release {
			if err := release(ctx, tx, vid); err != nil {
				return err
			}
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		// Should the commit fail, write forgets this state.
		b.known.put(id, after)
		return nil
	})
}

// applyPlan makes the write p plans on session h at version base: it
// updates the sessions row when p changes its own fields and inserts the
// write's row; it returns the state after it.
func (b *Backend) applyPlan(ctx context.Context, tx stmter, h *head, p *rowstore.Plan, base int64) (*head, error) {
	if update, args := b.rowUpdate(h, p); update != nil {
		if err := oneRow(tx.StmtContext(ctx, update).ExecContext(ctx, args...)); err != nil {
			return nil, err
		}
	}
	if p.Update.SetMetadata {
		if err := oneRow(tx.ExecContext(ctx, metadataSQL, p.Update.Metadata.Text, p.Update.Metadata.Sum,
			p.Update.Labels.RepoID, p.Update.Labels.Agent, h.Row)); err != nil {
			return nil, err
		}
	}
	return b.insertPlanned(ctx, tx, h, p, base)
}

// insertPlanned inserts the row of the write p plans on session h at
// version base and returns the state after it.
func (b *Backend) insertPlanned(ctx context.Context, tx stmter, h *head, p *rowstore.Plan, base int64) (*head, error) {
	after := &head{State: p.After(&h.State), turns: h.turns + int64(p.Update.Turns), updated: h.updated, seqEnd: h.seqEnd, touched: h.touched}
	if p.Update.Updated != nil {
		after.updated = *p.Update.Updated
	}
	if err := b.insertWrite(ctx, tx, after, base, after.View.Next(after.Length), p.Rows, p.Events); err != nil {
		return nil, err
	}
	return after, nil
}

// rowUpdate returns the statement, and its arguments, that updates
// session h's row as p says, or nil when p changes none of its fields.
func (b *Backend) rowUpdate(h *head, p *rowstore.Plan) (*sql.Stmt, []any) {
	v, u := p.View, &p.Update
	indexed := u.Status != nil || v.Base != h.View.Base
	if !indexed && !u.SetSummary && u.MaxTurns <= 0 && !u.SetTitle && !u.SetFirstPrompt {
		return nil, nil
	}
	args := []any{u.SetSummary, u.Summary.Text, u.SetSummary, u.Summary.Sum, u.MaxTurns, u.MaxTurns,
		u.SetTitle, u.Title.Text, u.SetTitle, u.Title.Sum,
		u.SetFirstPrompt, u.FirstPrompt.Text, u.SetFirstPrompt, u.FirstPrompt.Sum, h.Row}
	if indexed {
		return b.stmts.update, append([]any{v.BaseArg(), u.Status}, args...)
	}
	return b.stmts.updateLean, args
}

// errNoRow is oneRow's error for a statement that changed no row.
var errNoRow = errors.New("no row changed")

// oneRow checks that an UPDATE or INSERT changed exactly one row.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return err
	case n == 0:
		return errNoRow
	case n != 1:
		return fmt.Errorf("changed %d rows, want 1", n)
	}
	return nil
}

// Fork creates spec.Dst sharing the first KeepFirst messages of spec.Src
// and records the fork on the source, writing O(1) rows whatever the
// length (see the package doc). Dst's Messages and ChildIDs must be empty
// and its ParentID empty or Src; the stored ParentID is Src.
func (b *Backend) Fork(ctx context.Context, spec *sessions.ForkSpec) error {
	f, err := rowstore.EncodeFork(b.key, spec)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		t := &forkTx{ctx: ctx, b: b, tx: tx}
		if err := f.Apply(t); err != nil {
			return err
		}
		return t.finish()
	})
}

// forkTx is a write transaction as rowstore.Fork.Apply uses it. The
// rows of table writes wait for finish: the new session's first row
// holds its events, and the source's row the fork event, which Apply
// hands over after storing the session and before bumping the source.
type forkTx struct {
	ctx    context.Context
	b      *Backend
	tx     *sql.Tx
	src    *head                         // the source's state, as LockedState read it
	dst    *head                         // the new session's, as InsertSession stored it
	events map[int64][]rowstore.EventRow // by session row
	bumped *head                         // the source's state after Bump
}

func (t *forkTx) LockedState(id string) (*rowstore.State, error) {
	h, err := t.b.loadState(t.ctx, t.tx, id)
	if err != nil {
		return nil, err
	}
	t.src = h
	return &h.State, nil
}
func (t *forkTx) Exists(id string) (bool, error) { return exists(t.ctx, t.tx, id) }
func (t *forkTx) Freeze(sid int64, v rowstore.View) (int64, error) {
	return freeze(t.ctx, t.tx, sid, v)
}

func (t *forkTx) InsertSession(rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View, n int64) (int64, error) {
	sid, err := insertSession(t.ctx, t.tx, rec, row, v)
	if err != nil {
		return 0, err
	}
	t.dst = &head{State: rowstore.State{Row: sid, Version: rec.Version, Length: n, View: v}, turns: int64(rec.Turns), updated: row.Updated,
		touched: rowstore.Touched(row.Updated)}
	return sid, nil
}

func (t *forkTx) InsertEvents(sid int64, events []rowstore.EventRow) error {
	if t.events == nil {
		t.events = map[int64][]rowstore.EventRow{}
	}
	t.events[sid] = append(t.events[sid], events...)
	return nil
}

func (t *forkTx) Bump(sid, version int64, updated *int64) error {
	if t.src == nil || t.src.Row != sid || t.src.Version != version {
		return errors.New("the fork bumps a session it did not read")
	}
	after := *t.src
	after.Version++
	if updated != nil {
		after.updated = *updated
	}
	t.bumped = &after
	return nil
}

// finish inserts the writes rows of the fork: the new session's first
// and the source's.
func (t *forkTx) finish() error {
	if t.dst == nil || t.bumped == nil {
		return errors.New("the fork stored no session or did not bump its source")
	}
	if err := t.b.insertCreated(t.ctx, t.tx, t.dst, nil, t.events[t.dst.Row]); err != nil {
		return err
	}
	src := t.bumped
	return t.b.insertWrite(t.ctx, t.tx, src, t.src.Version, src.View.Next(src.Length), nil, t.events[src.Row])
}
