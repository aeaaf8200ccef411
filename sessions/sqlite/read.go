package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// querier is what *sql.DB and *sql.Tx share for single-row queries.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exists reports whether session id is stored.
func exists(ctx context.Context, q querier, id string) (bool, error) {
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?)`, id).Scan(&ok)
	return ok, err
}

// Exists reports whether session id is stored.
func (b *Backend) Exists(ctx context.Context, id string) (bool, error) {
	ok, err := exists(ctx, b.db, id)
	if err != nil {
		return false, sessions.IDError(id, err)
	}
	return ok, nil
}

// Load returns the session's full state (sessions.ErrNotFound).
func (b *Backend) Load(ctx context.Context, id string) (*sessions.Record, error) {
	var rec *sessions.Record
	err := b.read(ctx, func(tx *sql.Tx) error {
		r, st, err := loadTranscript(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.Events, err = loadEvents(ctx, tx, st.Row, id, 0, 0); err != nil {
			return sessions.IDError(id, err)
		}
		rec = r
		return nil
	})
	return rec, err
}

// LoadTranscript returns the session's state without its event log, and
// the seq of the log's newest event (sessions.ErrNotFound): what resuming
// a session needs, at about half the cost of Load for a session whose log
// has an event per message.
func (b *Backend) LoadTranscript(ctx context.Context, id string) (*sessions.Record, int64, error) {
	var rec *sessions.Record
	var lastSeq int64
	err := b.read(ctx, func(tx *sql.Tx) error {
		r, st, err := loadTranscript(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM events WHERE sid = ?`, st.Row).Scan(&lastSeq); err != nil {
			return sessions.IDError(id, fmt.Errorf("events: %w", err))
		}
		rec = r
		return nil
	})
	return rec, lastSeq, err
}

// LoadEvents returns the session's event log, oldest first
// (sessions.ErrNotFound).
func (b *Backend) LoadEvents(ctx context.Context, id string) ([]sessions.Event, error) {
	var events []sessions.Event
	err := b.read(ctx, func(tx *sql.Tx) error {
		sid, err := sessionSID(ctx, tx, id)
		if err != nil {
			return sessions.IDError(id, err)
		}
		if events, err = loadEvents(ctx, tx, sid, id, 0, 0); err != nil {
			return sessions.IDError(id, err)
		}
		return nil
	})
	return events, err
}

// sessionSID returns the row key of session id (sessions.ErrNotFound).
func sessionSID(ctx context.Context, tx *sql.Tx, id string) (int64, error) {
	var sid int64
	err := tx.QueryRowContext(ctx, `SELECT sid FROM sessions WHERE id = ?`, id).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		err = sessions.ErrNotFound
	}
	return sid, err
}

// LoadAppended returns the messages the session's "message" events
// appended, by the events' seq, including those no longer in its current
// message list (sessions.HistoryBackend, sessions.ErrNotFound).
func (b *Backend) LoadAppended(ctx context.Context, id string) (map[int64]sessions.Message, error) {
	var out map[int64]sessions.Message
	err := b.read(ctx, func(tx *sql.Tx) error {
		var sid int64
		var n int
		err := tx.QueryRowContext(ctx, `SELECT s.sid, (SELECT count(*) FROM events e WHERE e.sid = s.sid AND e.pos IS NOT NULL)
			FROM sessions s WHERE s.id = ?`, id).Scan(&sid, &n)
		if errors.Is(err, sql.ErrNoRows) {
			err = sessions.ErrNotFound
		}
		if err != nil {
			return sessions.IDError(id, err)
		}
		seqs := make([]int64, n)
		msgs := make([]sessions.Message, n)
		dec := rowstore.NewDecoder("message", n, func(i int, body []byte) error { return msgs[i].UnmarshalJSON(body) })
		err = readAppended(ctx, tx, sid, seqs, dec)
		if derr := dec.Wait(); err == nil {
			err = derr
		}
		if err != nil {
			return sessions.IDError(id, fmt.Errorf("appended messages: %w", err))
		}
		out = make(map[int64]sessions.Message, n)
		for i, seq := range seqs {
			out[seq] = msgs[i]
		}
		return nil
	})
	return out, err
}

// readAppended fills seqs with the seqs of session sid's message events
// that record their message row, in order, handing the rows' bodies to
// dec.
func readAppended(ctx context.Context, tx *sql.Tx, sid int64, seqs []int64, dec *rowstore.Decoder) error {
	rows, err := tx.QueryContext(ctx, `SELECT e.seq, m.body, m.crc FROM events e JOIN messages m ON m.sid = e.sid AND m.pos = e.pos
		WHERE e.sid = ? AND e.pos IS NOT NULL ORDER BY e.seq`, sid)
	if err != nil {
		return err
	}
	defer rows.Close()
	i := 0
	var body sql.RawBytes
	var sum sql.NullInt64
	for ; i < len(seqs) && rows.Next(); i++ {
		if err := rows.Scan(&seqs[i], &body, &sum); err != nil {
			return err
		}
		if err := rowstore.Verify(i, body, nullInt(sum)); err != nil {
			return err
		}
		dec.Add(i, body)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(seqs) {
		return fmt.Errorf("read %d rows, want %d", i, len(seqs))
	}
	return nil
}

// LoadMeta returns the session's state without messages and events
// (sessions.ErrNotFound).
func (b *Backend) LoadMeta(ctx context.Context, id string) (*sessions.Record, error) {
	var rec *sessions.Record
	err := b.read(ctx, func(tx *sql.Tx) error {
		r, _, err := loadRecord(ctx, tx, id)
		rec = r
		return err
	})
	return rec, err
}

// loadTranscript reads session id's row, children and current messages.
func loadTranscript(ctx context.Context, tx *sql.Tx, id string) (*sessions.Record, *rowstore.State, error) {
	rec, st, err := loadRecord(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	if rec.Messages, err = loadMessages(ctx, tx, st.Row, st.View, st.Length); err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	return rec, st, nil
}

// loadRecord reads session id's row and children.
func loadRecord(ctx context.Context, tx *sql.Tx, id string) (*sessions.Record, *rowstore.State, error) {
	var s rowstore.StoredSession
	var base sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT sid, status, created_at, updated_at, summary, metadata, parent_id,
			branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length, title, first_prompt
		FROM sessions WHERE id = ?`, id).
		Scan(&s.State.Row, &s.Status, &s.Created, &s.Updated, &s.Summary, &s.Metadata, &s.ParentID,
			&s.Branched, &s.Turns, &s.MaxTurns, &s.State.Version, &base, &s.State.View.BaseFrom, &s.State.View.BaseTo,
			&s.State.View.OwnFrom, &s.State.Length, &s.Title, &s.FirstPrompt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	s.State.View.Base = base.Int64
	rec, err := s.Record(id)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM sessions WHERE parent_id = ? ORDER BY sid`, id)
	if err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var child string
		if err := rows.Scan(&child); err != nil {
			return nil, nil, sessions.IDError(id, err)
		}
		rec.ChildIDs = append(rec.ChildIDs, child)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	return rec, &s.State, nil
}

// loadEvents reads session sid's events with seq > after, oldest first:
// at most limit of them, or all when limit is 0.
func loadEvents(ctx context.Context, tx *sql.Tx, sid int64, id string, after int64, limit int) ([]sessions.Event, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE sid = ? AND seq > ?`, sid, after).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	if limit > 0 {
		n = min(n, limit)
	}
	events := make([]sessions.Event, n)
	dec := rowstore.NewDecoder("event", n, func(i int, data []byte) (err error) {
		events[i].Data, err = jsonvalue.DecodeObject(data)
		return err
	})
	i, err := readEvents(ctx, tx, sid, id, after, events, dec)
	// Wait for the decoder's workers even after a read error.
	if derr := dec.Wait(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if i != n {
		return nil, fmt.Errorf("events: read %d rows, want %d", i, n)
	}
	return events, nil
}

// readEvents fills events with the rows of session sid's log after seq
// after, handing their data to dec, and returns how many it read.
func readEvents(ctx context.Context, tx *sql.Tx, sid int64, id string, after int64, events []sessions.Event, dec *rowstore.Decoder) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, type, time, corr_id, data FROM events WHERE sid = ? AND seq > ? ORDER BY seq`, sid, after)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	i := 0
	var corrID *string
	var t int64
	var data sql.RawBytes
	for ; i < len(events) && rows.Next(); i++ {
		e := &events[i]
		if err := rows.Scan(&e.Seq, &e.Type, &t, &corrID, &data); err != nil {
			return i, err
		}
		rowstore.DecodeEvent(e, id, t, corrID)
		if data != nil {
			dec.Add(i, data)
		}
	}
	return i, rows.Err()
}
