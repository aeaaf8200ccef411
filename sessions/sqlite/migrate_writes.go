package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// migration9 stores each write as one row (see the package doc): table
// writes replaces messages and events, and holds the session's state
// after each write (version, length, view, turns, updated_at), which
// leaves the sessions table; the base of the view stays there, since
// frozen views are released by looking it up. A row's key is its
// session's sid and the version the write was made on (writeKey). toWrites, the Go step,
// moves the rows of earlier versions over, drops the old tables and
// columns and creates view session_heads.
const migration9 = `
CREATE TABLE writes (
	key        INTEGER PRIMARY KEY,
	version    INTEGER NOT NULL,
	length     INTEGER NOT NULL,
	base_from  INTEGER NOT NULL,
	base_to    INTEGER NOT NULL,
	own_from   INTEGER NOT NULL,
	turns      INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	pos        INTEGER NOT NULL,
	pos_end    INTEGER NOT NULL,
	seq        INTEGER NOT NULL,
	seq_end    INTEGER NOT NULL,
	messages   BLOB,
	events     BLOB
) STRICT;
`

// migration9Finish drops what table writes replaces and creates view
// session_heads: every session with the state its newest write left (the
// row with the greatest key in the session's range, see writeKey).
const migration9Finish = `
DROP TABLE messages;
DROP TABLE events;
ALTER TABLE sessions DROP COLUMN version;
ALTER TABLE sessions DROP COLUMN length;
ALTER TABLE sessions DROP COLUMN base_from;
ALTER TABLE sessions DROP COLUMN base_to;
ALTER TABLE sessions DROP COLUMN own_from;
ALTER TABLE sessions DROP COLUMN turns;
ALTER TABLE sessions DROP COLUMN updated_at;
CREATE VIEW session_heads AS
	SELECT s.sid, s.id, s.status, s.created_at, w.updated_at, s.summary, s.metadata, s.parent_id,
		s.branched_at, w.turns, s.max_turns, w.version, s.base, w.base_from, w.base_to, w.own_from,
		w.length, s.title, s.first_prompt, w.seq_end
	FROM sessions s JOIN writes w ON w.key = (SELECT max(key) FROM writes WHERE key >= s.sid << 32 AND key < (s.sid + 1) << 32);
`

// migration9InsertSQL is insertWriteSQL as it was at version 9.
const migration9InsertSQL = `INSERT INTO writes (key, version, length, base_from, base_to, own_from, turns, updated_at,
	pos, pos_end, seq, seq_end, messages, events)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE sid = ?)`

// migratedRowSize bounds the messages, and the events, that toWrites
// puts in one row.
const migratedRowSize = 1024

// toWrites is migration 9's step: each session's message and event rows
// become rows of table writes, in order, up to migratedRowSize messages
// and events a row, keyed by negative bases (before any write's, whose
// base is a version), each with the session's state. It reads one
// session's rows at a time.
func toWrites(ctx context.Context, tx *sql.Tx) error {
	var heads []head
	err := eachRow(ctx, tx, `SELECT sid, version, length, base_from, base_to, own_from, turns, updated_at FROM sessions ORDER BY sid`, nil,
		func(rows *sql.Rows) error {
			var h head
			err := rows.Scan(&h.Row, &h.Version, &h.Length, &h.View.BaseFrom, &h.View.BaseTo, &h.View.OwnFrom, &h.turns, &h.updated)
			heads = append(heads, h)
			return err
		})
	if err != nil {
		return err
	}
	insert, err := tx.PrepareContext(ctx, migration9InsertSQL)
	if err != nil {
		return err
	}
	defer insert.Close()
	for i := range heads {
		if err := migrateSession(ctx, tx, insert, &heads[i]); err != nil {
			return fmt.Errorf("session row %d: %w", heads[i].Row, err)
		}
	}
	_, err = tx.ExecContext(ctx, migration9Finish)
	return err
}

// migrateSession is toWrites for the rows of one session, whose state is h.
func migrateSession(ctx context.Context, tx *sql.Tx, insert *sql.Stmt, h *head) error {
	type chunk struct {
		blob       []byte
		first, end int64
	}
	var msgs []chunk
	count := 0
	err := eachRow(ctx, tx, `SELECT pos, body, crc FROM messages WHERE sid = ? ORDER BY pos`, []any{h.Row}, func(rows *sql.Rows) error {
		var pos int64
		var body []byte
		var crc sql.NullInt64
		if err := rows.Scan(&pos, &body, &crc); err != nil {
			return err
		}
		if len(msgs) == 0 || count == migratedRowSize || pos != msgs[len(msgs)-1].end {
			msgs, count = append(msgs, chunk{first: pos, end: pos}), 0
		}
		c := &msgs[len(msgs)-1]
		c.blob = appendMessage(c.blob, body, nullInt(crc))
		c.end, count = pos+1, count+1
		return nil
	})
	if err != nil {
		return err
	}
	var evs []chunk
	count = 0
	err = eachRow(ctx, tx, `SELECT seq, type, time, corr_id, data, pos FROM events WHERE sid = ? ORDER BY seq`, []any{h.Row}, func(rows *sql.Rows) error {
		var e rowstore.EventRow
		if err := rows.Scan(&e.Seq, &e.Type, &e.Time, &e.CorrID, &e.Data, &e.Pos); err != nil {
			return err
		}
		if len(evs) == 0 || count == migratedRowSize {
			evs, count = append(evs, chunk{first: e.Seq, end: e.Seq + 1}), 0
		}
		c := &evs[len(evs)-1]
		var err error
		// Each event's seq is stored as its distance from the previous one's.
		if c.blob, err = encodeEvents(c.blob, c.end-1, []rowstore.EventRow{e}); err != nil {
			return err
		}
		c.end, count = e.Seq+1, count+1
		return nil
	})
	if err != nil {
		return err
	}
	n := max(len(msgs), len(evs), 1)
	pos, seq := int64(0), int64(1)
	for i := range n {
		m, e := chunk{first: pos, end: pos}, chunk{first: seq, end: seq}
		if i < len(msgs) {
			m = msgs[i]
		}
		if i < len(evs) {
			e = evs[i]
		}
		pos, seq = m.end, e.end
		key, err := writeKey(h.Row, int64(i-n))
		if err != nil {
			return err
		}
		if _, err := insert.ExecContext(ctx, key, h.Version, h.Length, h.View.BaseFrom, h.View.BaseTo, h.View.OwnFrom,
			h.turns, h.updated, m.first, m.end, e.first, e.end, m.blob, e.blob, h.Row); err != nil {
			return err
		}
	}
	return nil
}
