package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
)

// state is what a write needs of a stored session.
type state struct {
	sid, version, length int64
	view                 view
}

// loadState reads the state of session id (sessions.ErrNotFound).
func (b *Backend) loadState(ctx context.Context, tx *sql.Tx, id string) (*state, error) {
	var st state
	var base sql.NullInt64
	err := tx.StmtContext(ctx, b.stmts.state).QueryRowContext(ctx, id).
		Scan(&st.sid, &st.version, &st.length, &base, &st.view.baseFrom, &st.view.baseTo, &st.view.ownFrom)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, sessions.IDError(id, err)
	}
	st.view.base = base.Int64
	return &st, nil
}

// checkNoChildren refuses a new session that lists children: the children
// of a session are the stored sessions whose parent it is, and Fork
// records them.
func checkNoChildren(rec *sessions.Record) error {
	if len(rec.ChildIDs) > 0 {
		return sessions.IDError(rec.ID, errors.New("a new session cannot list children (forks record them)"))
	}
	return nil
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
func insertSession(ctx context.Context, tx *sql.Tx, rec *sessions.Record, row *sessionRow, v view, n int64) (int64, error) {
	var sid int64
	err := tx.QueryRowContext(ctx, `INSERT INTO sessions (id, status, created_at, updated_at, summary, metadata,
			parent_id, branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length,
			title, first_prompt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING sid`,
		rec.ID, row.status, row.created, row.updated, row.summary, row.metadata,
		row.parentID, row.branched, rec.Turns, rec.MaxTurns, rec.Version,
		v.baseArg(), v.baseFrom, v.baseTo, v.ownFrom, n, row.title, row.firstPrompt).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, sessions.IDError(rec.ID, sessions.ErrExists)
	}
	if err != nil {
		return 0, sessions.IDError(rec.ID, err)
	}
	return sid, nil
}

// insertEvents appends events to session sid's log.
func (b *Backend) insertEvents(ctx context.Context, tx *sql.Tx, sid int64, events []eventRow) error {
	if len(events) == 0 {
		return nil
	}
	stmt := tx.StmtContext(ctx, b.stmts.insertEvent)
	for _, e := range events {
		if _, err := stmt.ExecContext(ctx, sid, e.seq, e.typ, e.time, e.corrID, e.data, e.pos); err != nil {
			return fmt.Errorf("event %d: %w", e.seq, err)
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
	if err := checkNoChildren(rec); err != nil {
		return err
	}
	row, err := encodeSession(rec)
	if err != nil {
		return err
	}
	bodies, err := encodeMessages(rec.ID, "message", rec.Messages)
	if err != nil {
		return err
	}
	events, err := encodeEvents(rec.ID, rec.Events)
	if err != nil {
		return err
	}
	history, err := encodeHistory(rec.ID, events, appended)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		if err := checkParentChain(ctx, tx, rec); err != nil {
			return err
		}
		sid, err := insertSession(ctx, tx, rec, row, view{ownFrom: int64(len(history))}, int64(len(bodies)))
		if err != nil {
			return err
		}
		if err := b.insertMessages(ctx, tx, sid, 0, history); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		if err := b.insertMessages(ctx, tx, sid, int64(len(history)), bodies); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		if err := b.insertEvents(ctx, tx, sid, events); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		return nil
	})
}

// encodedChange is a sessions.Change in its stored form.
type encodedChange struct {
	ch                                 *sessions.Change
	replace, appended                  []storedBody
	events                             []eventRow
	status, updated, summary, metadata any
}

func encodeChange(id string, ch *sessions.Change) (*encodedChange, error) {
	if ch.DropFirst < 0 {
		return nil, sessions.IDError(id, fmt.Errorf("cannot drop %d messages", ch.DropFirst))
	}
	if ch.DropLast < 0 || (ch.DropLast > 0 && ch.DropFirst > 0 && !ch.Replace) {
		return nil, sessions.IDError(id, fmt.Errorf("cannot drop the last %d messages (with %d first)", ch.DropLast, ch.DropFirst))
	}
	e := &encodedChange{ch: ch}
	var err error
	if ch.Replace {
		if e.replace, err = encodeMessages(id, "replacement message", ch.ReplaceWith); err != nil {
			return nil, err
		}
	}
	if e.appended, err = encodeMessages(id, "appended message", ch.Append); err != nil {
		return nil, err
	}
	if e.events, err = encodeEvents(id, ch.Events); err != nil {
		return nil, err
	}
	if ch.Status != "" {
		e.status = string(ch.Status)
	}
	if !ch.UpdatedAt.IsZero() {
		if e.updated, err = encodeTime(ch.UpdatedAt); err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("updated_at: %w", err))
		}
	}
	if ch.Summary != nil {
		e.summary = *ch.Summary
	}
	if e.metadata, err = encodeObject(ch.Metadata); err != nil {
		return nil, sessions.IDError(id, fmt.Errorf("metadata: %w", err))
	}
	return e, nil
}

// rowUpdate is what the changes of one Write do to the session's row
// besides its view: each field as the last change that sets it left it.
type rowUpdate struct {
	setSummary, setTitle, setMetadata, setFirstPrompt bool
	summary, status, updated, title, metadata, prompt any
	turns, maxTurns                                   int
}

// add folds e into u.
func (u *rowUpdate) add(e *encodedChange) {
	ch := e.ch
	if ch.SetSummary {
		u.setSummary, u.summary = true, e.summary
	}
	if e.status != nil {
		u.status = e.status
	}
	u.turns += ch.AddTurns
	if ch.MaxTurns > 0 {
		u.maxTurns = ch.MaxTurns
	}
	if ch.SetTitle {
		u.setTitle, u.title = true, nullString(ch.Title)
	}
	if ch.SetMetadata {
		u.setMetadata, u.metadata = true, e.metadata
	}
	if ch.SetFirstPrompt {
		u.setFirstPrompt, u.prompt = true, nullString(ch.FirstPrompt)
	}
	if e.updated != nil {
		u.updated = e.updated
	}
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
// conditional on its id and version, checks it; when another writer
// has been there meanwhile, the row is read as usual.
func (b *Backend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	encoded := make([]*encodedChange, len(changes))
	dropsLast := false
	for i, ch := range changes {
		var err error
		if encoded[i], err = encodeChange(id, ch); err != nil {
			return err
		}
		dropsLast = dropsLast || ch.DropLast > 0
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		// A DropLast may write a frozen view while planning: only a
		// state read in this transaction will do for it.
		st, known := b.known.get(id, base), true
		if st == nil || dropsLast {
			known = false
		}
		var p *writePlan
		for {
			if !known {
				var err error
				if st, err = b.loadState(ctx, tx, id); err != nil {
					return err
				}
				if st.version != base {
					return sessions.IDError(id, sessions.ErrConflict)
				}
			}
			var err error
			if p, err = planWrite(ctx, tx, id, st, encoded); err != nil {
				return err
			}
			updated, err := b.updateRow(ctx, tx, st, p, base, len(changes))
			if err != nil {
				return sessions.IDError(id, err)
			}
			if updated {
				break
			}
			if !known {
				return sessions.IDError(id, errors.New("the session's row was not updated"))
			}
			known = false // another writer was there: nothing is written yet
		}
		if err := b.insertMessageRows(ctx, tx, st.sid, p.rows); err != nil {
			return sessions.IDError(id, err)
		}
		if err := b.insertEvents(ctx, tx, st.sid, p.events); err != nil {
			return sessions.IDError(id, err)
		}
		// Release the bases the view left, newest first: a base frozen
		// by this write's DropLast holds the one before it.
		for i := len(p.bases) - 1; i >= 0; i-- {
			if p.bases[i] != p.view.base {
				if err := release(ctx, tx, p.bases[i]); err != nil {
					return err
				}
			}
		}
		// Should the commit fail, the next write finds the row's
		// version is not this one and reads the row.
		b.known.put(id, &state{sid: st.sid, version: base + int64(len(changes)), length: p.length, view: p.view})
		return nil
	})
}

// writePlan is what a Write does to a session: the message and event
// rows it inserts, the view and length it leaves, the other fields of
// the row it sets, and every base the view had, oldest first.
type writePlan struct {
	rows   []messageRow
	events []eventRow
	row    rowUpdate
	view   view
	length int64
	bases  []int64
}

// planWrite applies the encoded changes to the state st of session id.
// It writes to tx only for a DropLast that freezes the view.
func planWrite(ctx context.Context, tx *sql.Tx, id string, st *state, encoded []*encodedChange) (*writePlan, error) {
	p := &writePlan{view: st.view, length: st.length, bases: []int64{st.view.base}}
	v, n := st.view, st.length
	for _, e := range encoded {
		ch := e.ch
		switch {
		case ch.Replace:
			v = view{ownFrom: v.next(n)}
			p.rows = appendRows(p.rows, v.ownFrom, e.replace)
			n = int64(len(e.replace))
		case ch.DropFirst > 0:
			if int64(ch.DropFirst) > n {
				return nil, sessions.IDError(id, fmt.Errorf("cannot drop %d of %d messages", ch.DropFirst, n))
			}
			v, n = v.drop(int64(ch.DropFirst)), n-int64(ch.DropFirst)
		case ch.DropLast > 0:
			if int64(ch.DropLast) > n {
				return nil, sessions.IDError(id, fmt.Errorf("cannot drop the last %d of %d messages", ch.DropLast, n))
			}
			var err error
			if v, err = dropLast(ctx, tx, st.sid, v, n, int64(ch.DropLast)); err != nil {
				return nil, sessions.IDError(id, err)
			}
			n -= int64(ch.DropLast)
		}
		pairAppended(e.events, v.next(n), len(e.appended))
		p.rows = appendRows(p.rows, v.next(n), e.appended)
		n += int64(len(e.appended))
		p.events = append(p.events, e.events...)
		p.row.add(e)
		if v.base != p.bases[len(p.bases)-1] {
			p.bases = append(p.bases, v.base)
		}
	}
	p.view, p.length = v, n
	return p, nil
}

// updateRow updates session st's row as p says, bumping its version by
// changes, if the row's sid and version are st's and base: it reports
// whether they were.
func (b *Backend) updateRow(ctx context.Context, tx *sql.Tx, st *state, p *writePlan, base int64, changes int) (bool, error) {
	v, u := p.view, &p.row
	args := []any{changes, v.baseFrom, v.baseTo, v.ownFrom, p.length,
		u.setSummary, u.summary, u.turns,
		u.maxTurns, u.maxTurns, u.setTitle, u.title, u.setMetadata, u.metadata,
		u.setFirstPrompt, u.prompt, u.updated,
		st.sid, base}
	update := b.stmts.updateLean
	if u.status != nil || v.base != st.view.base {
		update, args = b.stmts.update, append([]any{v.baseArg(), u.status}, args...)
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
	dst := spec.Dst
	if len(dst.Messages) > 0 {
		return fmt.Errorf("fork of %q: new session %q must not carry messages (they come from its source)", spec.Src, dst.ID)
	}
	if dst.ParentID != "" && dst.ParentID != spec.Src {
		return fmt.Errorf("fork of %q: new session %q names another parent %q", spec.Src, dst.ID, dst.ParentID)
	}
	dst.ParentID = spec.Src
	if err := checkNoChildren(&dst); err != nil {
		return err
	}
	row, err := encodeSession(&dst)
	if err != nil {
		return err
	}
	dstEvents, err := encodeEvents(dst.ID, dst.Events)
	if err != nil {
		return err
	}
	srcEvents, err := encodeEvents(spec.Src, []sessions.Event{spec.SrcEvent})
	if err != nil {
		return err
	}
	var srcTime any
	if !spec.SrcTime.IsZero() {
		if srcTime, err = encodeTime(spec.SrcTime); err != nil {
			return sessions.IDError(spec.Src, fmt.Errorf("updated_at: %w", err))
		}
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		src, err := b.loadState(ctx, tx, spec.Src)
		if err != nil {
			return err
		}
		if src.version != spec.SrcVersion {
			return sessions.IDError(spec.Src, sessions.ErrConflict)
		}
		if ok, err := exists(ctx, tx, dst.ID); err != nil || ok {
			if err == nil {
				err = sessions.ErrExists
			}
			return sessions.IDError(dst.ID, err)
		}
		keep := int64(spec.KeepFirst)
		if keep < 0 || keep > src.length {
			return fmt.Errorf("fork of %q: keep_first %d out of range (it has %d messages)", spec.Src, keep, src.length)
		}
		var v view // keep == 0: nothing shared
		switch {
		case keep > 0 && keep <= src.view.baseLen():
			// Inside the source's own base: share that directly.
			v = view{base: src.view.base, baseFrom: src.view.baseFrom, baseTo: src.view.baseFrom + keep}
		case keep > 0:
			vid, err := freeze(ctx, tx, src.sid, src.view)
			if err != nil {
				return fmt.Errorf("fork of %q: %w", spec.Src, err)
			}
			v = view{base: vid, baseTo: keep}
		}
		sid, err := insertSession(ctx, tx, &dst, row, v, keep)
		if err != nil {
			return err
		}
		if err := b.insertEvents(ctx, tx, sid, dstEvents); err != nil {
			return sessions.IDError(dst.ID, err)
		}
		if err := b.insertEvents(ctx, tx, src.sid, srcEvents); err != nil {
			return sessions.IDError(spec.Src, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET version = version + 1, updated_at = coalesce(?, updated_at)
			WHERE sid = ? AND version = ?`, srcTime, src.sid, src.version)
		if err := oneRow(res, err); err != nil {
			return sessions.IDError(spec.Src, err)
		}
		return nil
	})
}
