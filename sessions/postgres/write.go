package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
)

// querier is what a pool and a transaction share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// stateSQL reads what a write needs of a session.
const stateSQL = `SELECT sid, version, length, base, base_from, base_to, own_from FROM skein_sessions WHERE id = $1`

// loadState reads the state of session id (sessions.ErrNotFound); lock
// takes the row's lock until the transaction ends.
func loadState(ctx context.Context, q querier, id string, lock bool) (*rowstore.State, error) {
	var st rowstore.State
	var base *int64
	query := stateSQL
	if lock {
		query += " FOR UPDATE"
	}
	err := q.QueryRow(ctx, query, id).Scan(&st.Row, &st.Version, &st.Length, &base, &st.View.BaseFrom, &st.View.BaseTo, &st.View.OwnFrom)
	if errNoRows(err) {
		return nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, sessions.IDError(id, err)
	}
	if base != nil {
		st.View.Base = *base
	}
	return &st, nil
}

// applySQL returns one Write as one statement, with its arguments: it
// updates the session row (sid) if its version is still the base one,
// and only then inserts the message and event rows (from arrays) and,
// when there are events, notifies the session's channel (channel, see
// eventChannel) unless its only listeners are own (the keys of this
// Backend's listening connections, see NewNotifier), returning how many
// session rows it updated. Run on its own, it is one transaction and one
// commit.
//
// The UPDATE assigns only the columns the write changes: the version and
// the view always, the others (turns, updated_at, summary, status, turn
// cap, title, metadata with its labels, first prompt, each with its
// checksum) when the plan sets them. So PostgreSQL neither evaluates the others
// nor computes again column meta, which it generates from the metadata
// (a stored generated column is computed again only when a column it
// reads is assigned: a write that assigned the metadata its own value
// parsed it again, milliseconds for a large one); and no indexed column
// changes but touched, once a minute, so the update is HOT (no new index
// entries). Each shape is one statement text, which pgx prepares once
// per connection.
//
// With lk set (a lock held for the session whose row no write recorded
// yet, see NewLocker), the statement also records lk's row in
// skein_locks if it updated the session row: so the row commits with the
// first write made under the lock.
func applySQL(sid, base int64, channel string, own []int64, p *rowstore.Plan, rows []any, lk *lock) (string, []any) {
	u := &p.Update
	args := append(rows, sid, base, p.Changes, p.View.BaseArg(), p.View.BaseFrom, p.View.BaseTo, p.View.OwnFrom, p.Length)
	var q strings.Builder
	q.WriteString(`WITH u AS (
	UPDATE skein_sessions SET version = version + $13,
		base = $14, base_from = $15, base_to = $16, own_from = $17, length = $18`)
	set := func(column, cast string, v any) {
		args = append(args, v)
		fmt.Fprintf(&q, ", %s = $%d::%s", column, len(args), cast)
	}
	if u.Turns != 0 {
		args = append(args, u.Turns)
		fmt.Fprintf(&q, ", turns = turns + $%d::bigint", len(args))
	}
	if u.Updated != nil {
		set("updated_at", "bigint", *u.Updated)
	}
	if u.SetSummary {
		set("summary", "text", u.Summary.Text)
		set("summary_crc", "bigint", u.Summary.Sum)
	}
	if u.Status != nil {
		set("status", "text", *u.Status)
	}
	if u.MaxTurns > 0 {
		set("max_turns", "bigint", u.MaxTurns)
	}
	if u.SetTitle {
		set("title", "text", u.Title.Text)
		set("title_crc", "bigint", u.Title.Sum)
	}
	if u.SetMetadata {
		set("metadata", "text", u.Metadata.Text)
		set("metadata_crc", "bigint", u.Metadata.Sum)
		set("repo_id", "text", u.Labels.RepoID)
		set("agent", "text", u.Labels.Agent)
	}
	if u.SetFirstPrompt {
		set("first_prompt", "text", u.FirstPrompt.Text)
		set("first_prompt_crc", "bigint", u.FirstPrompt.Sum)
	}
	q.WriteString(`
	WHERE sid = $11 AND version = $12
	RETURNING sid`)
	if n := notification(channel, p.Events); n != nil {
		// Once for the row updated, none if the version moved on; sent
		// at the commit of the statement's transaction, when a listener
		// other than this Backend's is registered (see NewNotifier).
		args = append(args, n.channel, n.payload, own)
		fmt.Fprintf(&q, `, CASE WHEN %s THEN pg_notify($%d::text, $%d::text) END`, othersListen(len(args)), len(args)-2, len(args)-1)
	}
	q.WriteString(`
), `)
	if lk != nil {
		args = append(args, lk.name, lk.holder, lk.conn)
		q.WriteString(`k AS (` + recordKeptSQL(len(args)-2, len(args)-1, len(args), "u") + `), `)
	}
	q.WriteString(rowsSQL)
	return q.String(), args
}

// note is a notification of new events.
type note struct{ channel, payload string }

// notification returns the notification of events appended to the
// session whose channel (eventChannel) is channel: the seq of the newest
// as the payload, which NewNotifier's watchers read. Nil: no events, no
// notification.
func notification(channel string, events []rowstore.EventRow) *note {
	if len(events) == 0 {
		return nil
	}
	last := events[0].Seq
	for _, e := range events[1:] {
		last = max(last, e.Seq)
	}
	return &note{channel, strconv.FormatInt(last, 10)}
}

// rowsSQL is the rest of applySQL's statement after CTE u: the inserts
// of the message rows (parameters 1 to 3: positions, bodies, checksums)
// and of the event rows (4 to 10: seqs, types, times, corr_ids, data,
// positions, data checksums) of the session row u updated, and the
// count of the rows u updated.
const rowsSQL = `m AS (
	INSERT INTO skein_messages (sid, pos, body, crc)
	SELECT u.sid, r.pos, r.body, r.crc FROM u, unnest($1::bigint[], $2::text[], $3::bigint[]) AS r (pos, body, crc)
), e AS (
	INSERT INTO skein_events (sid, seq, type, time, corr_id, data, pos, crc)
	SELECT u.sid, r.seq, r.type, r.time, r.corr_id, r.data, r.pos, r.crc
	FROM u, unnest($4::bigint[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::bigint[], $10::bigint[])
		AS r (seq, type, time, corr_id, data, pos, crc)
)
SELECT count(*) FROM u`

// eventArrays are event rows as the columns' arrays.
type eventArrays struct {
	seqs, times []int64
	types       []string
	corrIDs     []*string
	data        []*string
	pos, sums   []*int64
}

func columns(events []rowstore.EventRow) eventArrays {
	a := eventArrays{
		seqs: make([]int64, len(events)), times: make([]int64, len(events)), types: make([]string, len(events)),
		corrIDs: make([]*string, len(events)), data: make([]*string, len(events)), pos: make([]*int64, len(events)),
		sums: make([]*int64, len(events)),
	}
	for i, e := range events {
		a.seqs[i], a.types[i], a.times[i], a.corrIDs[i], a.data[i], a.pos[i], a.sums[i] = e.Seq, e.Type, e.Time, e.CorrID, e.Data, e.Pos, e.Sum
	}
	return a
}

// messageColumns returns rows as their positions, bodies and checksums.
func messageColumns(rows []rowstore.MessageRow) (pos []int64, bodies []string, sums []int64) {
	pos, bodies, sums = make([]int64, len(rows)), make([]string, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		pos[i], bodies[i], sums[i] = r.Pos, r.Body.JSON, int64(r.Body.Sum)
	}
	return pos, bodies, sums
}

// apply runs applySQL's statement for plan p on session id, whose
// state is st, in schema b.schema, and reports whether the session row
// was still at st.Version. It records the row of the lock held for the
// session, if no write did yet (see NewLocker).
func (b *Backend) apply(ctx context.Context, q querier, id string, st *rowstore.State, p *rowstore.Plan) (bool, error) {
	pos, bodies, sums := messageColumns(p.Rows)
	ev := columns(p.Events)
	lk := b.lockRecords.pending(id)
	sql, args := applySQL(st.Row, st.Version, eventChannel(b.schema, st.Row), b.listeners.keys(), p, []any{pos, bodies, sums, ev.seqs, ev.types, ev.times, ev.corrIDs, ev.data, ev.pos, ev.sums}, lk)
	var n int
	err := q.QueryRow(ctx, sql, args...).Scan(&n)
	if lk != nil && (err != nil || n == 1) {
		// Stored, or perhaps (an error after the commit): the watcher
		// deletes it after the release either way.
		b.lockRecords.written(lk)
	}
	return n == 1, err
}

// Write applies changes to session id, in order, if its stored version is
// base, as one transaction, and bumps the version once per change
// (sessions.ErrNotFound, sessions.ErrConflict). A DropFirst or DropLast
// beyond the message count fails with nothing written.
//
// A write that freezes or releases no frozen view (every append, inject,
// trim within the own rows, reset and compaction of a session with no
// shared prefix: what an agent loop writes) is one statement, so one
// round trip and one commit after reading the session's state; the
// statement applies only if the version is still the one read. Others
// run in a transaction that locks the session's row.
func (b *Backend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	encoded, err := rowstore.EncodeChanges(b.key, id, changes)
	if err != nil {
		return err
	}
	ctx, err = uncancelled(ctx)
	if err != nil {
		return err
	}
	st, cached := b.states.get(id)
	if !cached || st.Version != base {
		fresh, err := loadState(ctx, b.pool, id, false)
		if err != nil {
			b.states.drop(id)
			return err
		}
		st, cached = *fresh, false
	}
	if st.Version != base {
		return sessions.IDError(id, sessions.ErrConflict)
	}
	p, err := rowstore.PlanWrite(id, &st, encoded, func(rowstore.View) (int64, error) { return 0, rowstore.ErrFreeze })
	switch {
	case errors.Is(err, rowstore.ErrFreeze):
	case err != nil:
		return err
	case len(p.Release) == 0:
		ok, err := b.apply(ctx, b.pool, id, &st, p)
		if err != nil {
			b.states.drop(id)
			return sessions.IDError(id, err)
		}
		if !ok {
			b.states.drop(id)
			if cached { // the guess was stale: read the state this time
				return b.Write(ctx, id, base, changes...)
			}
			return b.lostRace(ctx, id)
		}
		b.states.put(id, p.After(&st))
		return nil
	}
	b.states.drop(id)
	var after rowstore.State
	err = b.write(ctx, func(tx pgx.Tx) error {
		st, err := loadState(ctx, tx, id, true)
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
		if ok, err := b.apply(ctx, tx, id, st, p); err != nil || !ok {
			if err == nil {
				err = errors.New("the locked session row changed")
			}
			return sessions.IDError(id, err)
		}
		for _, vid := range p.Release {
			if err := release(ctx, tx, vid); err != nil {
				return sessions.IDError(id, err)
			}
		}
		after = p.After(st)
		return nil
	})
	if err == nil {
		b.states.put(id, after)
	}
	return err
}

// lostRace returns the error of a write whose statement found the session
// row changed since its state was read: deleted, or written by another.
func (b *Backend) lostRace(ctx context.Context, id string) error {
	ok, err := exists(ctx, b.pool, id)
	switch {
	case err != nil:
		return sessions.IDError(id, err)
	case !ok:
		return sessions.IDError(id, sessions.ErrNotFound)
	}
	return sessions.IDError(id, sessions.ErrConflict)
}

// freeze stores v, the current view of session row sid, as a frozen view
// and returns its id.
func freeze(ctx context.Context, q querier, sid int64, v rowstore.View) (int64, error) {
	var vid int64
	err := q.QueryRow(ctx, `INSERT INTO skein_views (sid, base, base_from, base_to, own_from) VALUES ($1, $2, $3, $4, $5) RETURNING vid`,
		sid, v.BaseArg(), v.BaseFrom, v.BaseTo, v.OwnFrom).Scan(&vid)
	return vid, err
}

// release deletes the frozen view vid if nothing references it any more,
// then does the same for its base, and so on down the chain. Two
// transactions that each drop a reference at once may both leave it: a
// views row is then kept that nothing uses, never one deleted that
// something does (the foreign keys refuse that).
func release(ctx context.Context, q querier, vid int64) error {
	for vid != 0 {
		var used bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skein_sessions WHERE base = $1) OR EXISTS (SELECT 1 FROM skein_views WHERE base = $1)`, vid).Scan(&used)
		if err != nil || used {
			return err
		}
		var base *int64
		err = q.QueryRow(ctx, `DELETE FROM skein_views WHERE vid = $1 RETURNING base`, vid).Scan(&base)
		switch {
		case errNoRows(err):
			return nil // deleted already, with its owner
		case err != nil:
			return err
		case base == nil:
			return nil
		}
		vid = *base
	}
	return nil
}

// lineageLock is the advisory lock a Create with a parent holds while it
// checks the parent chain and inserts, so that two creates cannot close a
// cycle between them.
const lineageLock = `SELECT pg_advisory_xact_lock(hashtextextended('skein lineage ' || current_schema(), 0))`

// checkParentChain refuses, in the transaction that inserts it, a new
// session whose stored parents lead back to it (sessions.ErrCycle).
func checkParentChain(ctx context.Context, tx pgx.Tx, rec *sessions.Record) error {
	if rec.ParentID == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, lineageLock); err != nil {
		return sessions.IDError(rec.ID, err)
	}
	return sessions.CheckParentChain(rec.ID, rec.ParentID, func(id string) (string, bool, error) {
		var parent *string
		err := tx.QueryRow(ctx, `SELECT parent_id FROM skein_sessions WHERE id = $1`, id).Scan(&parent)
		if errNoRows(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, sessions.IDError(rec.ID, err)
		}
		if parent == nil {
			return "", true, nil
		}
		return *parent, true, nil
	})
}

// insertSession stores rec's own fields with the current view v of n
// messages and returns the new row's sid (sessions.ErrExists).
func insertSession(ctx context.Context, tx pgx.Tx, rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View, n int64) (int64, error) {
	var sid int64
	err := tx.QueryRow(ctx, `INSERT INTO skein_sessions (id, status, created_at, updated_at, summary, metadata,
			parent_id, branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length,
			title, first_prompt, summary_crc, metadata_crc, title_crc, first_prompt_crc, repo_id, agent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
		ON CONFLICT (id) DO NOTHING RETURNING sid`,
		rec.ID, row.Status, row.Created, row.Updated, row.Summary.Text, row.Metadata.Text,
		row.ParentID, row.Branched, rec.Turns, rec.MaxTurns, rec.Version,
		v.BaseArg(), v.BaseFrom, v.BaseTo, v.OwnFrom, n, row.Title.Text, row.FirstPrompt.Text,
		row.Summary.Sum, row.Metadata.Sum, row.Title.Sum, row.FirstPrompt.Sum, row.Labels.RepoID, row.Labels.Agent).Scan(&sid)
	if errNoRows(err) {
		return 0, sessions.IDError(rec.ID, sessions.ErrExists)
	}
	if err != nil {
		return 0, sessions.IDError(rec.ID, err)
	}
	return sid, nil
}

// insertRows inserts message rows and events of session row sid of
// schema, each kind with one statement; the events' statement notifies
// the session's channel unless its only listeners are own (see applySQL).
func insertRows(ctx context.Context, tx pgx.Tx, schema string, own []int64, sid int64, rows []rowstore.MessageRow, events []rowstore.EventRow) error {
	if len(rows) > 0 {
		pos, bodies, sums := messageColumns(rows)
		if _, err := tx.Exec(ctx, `INSERT INTO skein_messages (sid, pos, body, crc) SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[])`,
			sid, pos, bodies, sums); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
	}
	if n := notification(eventChannel(schema, sid), events); n != nil {
		ev := columns(events)
		if _, err := tx.Exec(ctx, `WITH e AS (INSERT INTO skein_events (sid, seq, type, time, corr_id, data, pos, crc)
			SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bigint[], $8::bigint[]))
			SELECT pg_notify($9::text, $10::text) WHERE `+othersListen(11),
			sid, ev.seqs, ev.types, ev.times, ev.corrIDs, ev.data, ev.pos, ev.sums, n.channel, n.payload, own); err != nil {
			return fmt.Errorf("events: %w", err)
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
func (b *Backend) CreateWithHistory(ctx context.Context, rec *sessions.Record, appended map[int64]message.Message) error {
	c, err := rowstore.EncodeCreate(b.key, rec, appended)
	if err != nil {
		return err
	}
	st := c.State
	err = b.write(ctx, func(tx pgx.Tx) error {
		if err := checkParentChain(ctx, tx, rec); err != nil {
			return err
		}
		sid, err := insertSession(ctx, tx, rec, c.Row, st.View, st.Length)
		if err != nil {
			return err
		}
		st.Row = sid
		if err := insertRows(ctx, tx, b.schema, b.listeners.keys(), sid, c.Rows, c.Events); err != nil {
			return sessions.IDError(rec.ID, err)
		}
		return nil
	})
	if err == nil {
		b.states.put(rec.ID, st)
	}
	return err
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
	b.states.drop(spec.Src)
	return b.write(ctx, func(tx pgx.Tx) error { return f.Apply(forkTx{ctx, tx, b.schema, b.listeners.keys()}) })
}

// forkTx is a write transaction as rowstore.Fork.Apply uses it.
type forkTx struct {
	ctx    context.Context
	tx     pgx.Tx
	schema string
	own    []int64 // the Backend's listeners (see insertRows)
}

func (t forkTx) LockedState(id string) (*rowstore.State, error) {
	return loadState(t.ctx, t.tx, id, true)
}
func (t forkTx) Exists(id string) (bool, error) { return exists(t.ctx, t.tx, id) }
func (t forkTx) Freeze(sid int64, v rowstore.View) (int64, error) {
	return freeze(t.ctx, t.tx, sid, v)
}

func (t forkTx) InsertSession(rec *sessions.Record, row *rowstore.SessionRow, v rowstore.View, n int64) (int64, error) {
	return insertSession(t.ctx, t.tx, rec, row, v, n)
}

func (t forkTx) InsertEvents(sid int64, events []rowstore.EventRow) error {
	return insertRows(t.ctx, t.tx, t.schema, t.own, sid, nil, events)
}

func (t forkTx) Bump(sid, version int64, updated *int64) error {
	tag, err := t.tx.Exec(t.ctx, `UPDATE skein_sessions SET version = version + 1, updated_at = coalesce($1, updated_at)
		WHERE sid = $2 AND version = $3`, updated, sid, version)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("updated %d rows, want 1", tag.RowsAffected())
	}
	return err
}
