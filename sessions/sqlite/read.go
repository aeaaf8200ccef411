package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
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
		r, st, err := loadTranscript(ctx, tx, b.key, id)
		if err != nil {
			return err
		}
		if r.Events, err = loadEvents(ctx, tx, b.key, st.Row, id, 0, 0); err != nil {
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
		r, h, err := loadTranscript(ctx, tx, b.key, id)
		if err != nil {
			return err
		}
		rec, lastSeq = r, h.seqEnd-1
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
		if events, err = loadEvents(ctx, tx, b.key, sid, id, 0, 0); err != nil {
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
func (b *Backend) LoadAppended(ctx context.Context, id string) (map[int64]message.Message, error) {
	var out map[int64]message.Message
	err := b.read(ctx, func(tx *sql.Tx) error {
		sid, err := sessionSID(ctx, tx, id)
		if err != nil {
			return sessions.IDError(id, err)
		}
		if out, err = loadAppended(ctx, tx, b.key, sid); err != nil {
			return sessions.IDError(id, fmt.Errorf("appended messages: %w", err))
		}
		return nil
	})
	return out, err
}

// loadAppended reads the messages session sid's "message" events
// appended, by the events' seq: every writes row of the session, the
// message rows each event names matched to it.
func loadAppended(ctx context.Context, tx *sql.Tx, k *storekey.Key, sid int64) (map[int64]message.Message, error) {
	bodies := map[int64]storedMessage{}
	type appended struct{ seq, pos int64 }
	var list []appended
	lo, hi := sessionKeys(sid)
	err := eachRow(ctx, tx, `SELECT key, pos, messages, seq, events, events_crc FROM writes WHERE key >= ? AND key < ? ORDER BY key`, []any{lo, hi},
		func(rows *sql.Rows) error {
			var key, pos, seq int64
			var msgs, evs []byte // copied: the bodies outlive the row
			var evsSum sql.NullInt64
			if err := rows.Scan(&key, &pos, &msgs, &seq, &evs, &evsSum); err != nil {
				return err
			}
			if err := verifyEvents(evs, evsSum); err != nil {
				return rowError(key, err)
			}
			err := eachMessage(msgs, func(m storedMessage) error {
				bodies[pos] = m
				pos++
				return nil
			})
			if err == nil {
				err = eachEvent(evs, seq, func(e *storedEvent) error {
					if e.pos >= 0 {
						list = append(list, appended{e.seq, e.pos})
					}
					return nil
				})
			}
			return rowError(key, err)
		})
	if err != nil {
		return nil, err
	}
	msgs := make([]message.Message, len(list))
	dec := rowstore.NewDecoder("message", len(list), func(i int, body []byte) error { return rowstore.DecodeMessage(k, &msgs[i], body) })
	for i, a := range list {
		m, ok := bodies[a.pos]
		if !ok {
			err = fmt.Errorf("event %d appended message row %d, which is not stored", a.seq, a.pos)
			break
		}
		if err = rowstore.Verify(i, m.body, m.sum); err != nil {
			break
		}
		dec.Add(i, m.body)
	}
	// Wait for the decoder's workers even after an error.
	if derr := dec.Wait(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int64]message.Message, len(list))
	for i, a := range list {
		out[a.seq] = msgs[i]
	}
	return out, nil
}

// LoadMeta returns the session's state without messages and events
// (sessions.ErrNotFound).
func (b *Backend) LoadMeta(ctx context.Context, id string) (*sessions.Record, error) {
	var rec *sessions.Record
	err := b.read(ctx, func(tx *sql.Tx) error {
		r, _, err := loadRecord(ctx, tx, b.key, id)
		rec = r
		return err
	})
	return rec, err
}

var _ sessions.VersionReader = (*Backend)(nil)

// StoredVersion reads session id's version and creation time with one
// prepared statement. A writable Backend reads it on its write
// connection, whose page cache holds what its own writes left: a
// connection of the pool would read those pages again from the log
// after every commit. A read-only Backend prepares nothing.
func (b *Backend) StoredVersion(ctx context.Context, id string) (int64, time.Time, error) {
	var v sessions.StoredVersion
	if b.stmts.version != nil {
		err := b.onWriteConn(ctx, func(ctx context.Context, w *writeConn) error {
			v = b.readVersion(ctx, w, id)
			if fromDatabase(v.Err) {
				return v.Err // the connection is dropped
			}
			return nil
		})
		if err != nil {
			return 0, time.Time{}, sessions.IDError(id, err)
		}
	} else {
		v = versionOf(id, b.db.QueryRowContext(ctx, versionSQL, id))
	}
	return v.Version, v.Created, v.Err
}

// readVersion reads session id's version and creation time in tx (a
// transaction, or the write connection).
func (b *Backend) readVersion(ctx context.Context, tx stmter, id string) sessions.StoredVersion {
	return versionOf(id, tx.StmtContext(ctx, b.stmts.version).QueryRowContext(ctx, id))
}

// versionOf scans row, of versionSQL for session id.
func versionOf(id string, row *sql.Row) sessions.StoredVersion {
	var version, created int64
	err := row.Scan(&version, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return sessions.StoredVersion{Err: sessions.IDError(id, sessions.ErrNotFound)}
	}
	if err != nil {
		return sessions.StoredVersion{Err: sessions.IDError(id, err)}
	}
	return sessions.StoredVersion{Version: version, Created: rowstore.DecodeTime(created)}
}

// loadTranscript reads session id's row, children and current messages.
func loadTranscript(ctx context.Context, tx *sql.Tx, k *storekey.Key, id string) (*sessions.Record, *head, error) {
	rec, h, err := loadRecord(ctx, tx, k, id)
	if err != nil {
		return nil, nil, err
	}
	if rec.Messages, err = loadMessages(ctx, tx, k, h.Row, h.View, h.Length); err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	return rec, h, nil
}

// loadRecord reads session id's row with its state, and its children.
func loadRecord(ctx context.Context, tx *sql.Tx, k *storekey.Key, id string) (*sessions.Record, *head, error) {
	var s rowstore.StoredSession
	var base sql.NullInt64
	var seqEnd, touched int64
	err := tx.QueryRowContext(ctx, `SELECT sid, status, created_at, updated_at, summary, metadata, parent_id,
			branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length, title, first_prompt, seq_end,
			summary_crc, metadata_crc, title_crc, first_prompt_crc, touched
		FROM session_heads WHERE id = ?`, id).
		Scan(&s.State.Row, &s.Status, &s.Created, &s.Updated, &s.Summary, &s.Metadata, &s.ParentID,
			&s.Branched, &s.Turns, &s.MaxTurns, &s.State.Version, &base, &s.State.View.BaseFrom, &s.State.View.BaseTo,
			&s.State.View.OwnFrom, &s.State.Length, &s.Title, &s.FirstPrompt, &seqEnd,
			&s.SummarySum, &s.MetadataSum, &s.TitleSum, &s.FirstPromptSum, &touched)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	s.State.View.Base = base.Int64
	rec, err := s.Record(k, id)
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
	return rec, &head{State: s.State, turns: int64(s.Turns), updated: s.Updated, seqEnd: seqEnd, touched: touched}, nil
}

// errEnough stops eachRow when the rows read so far are all the caller
// wants.
var errEnough = errors.New("enough rows")

// loadEvents reads session sid's events with seq > after, oldest first:
// at most limit of them, or all when limit is 0. It reads the writes
// rows that hold such events.
func loadEvents(ctx context.Context, tx *sql.Tx, k *storekey.Key, sid int64, id string, after int64, limit int) ([]sessions.Event, error) {
	var events []sessions.Event
	var data [][]byte // each event's, within its row's blob
	lo, hi := sessionKeys(sid)
	err := eachRow(ctx, tx, `SELECT key, seq, events, events_crc FROM writes WHERE key >= ? AND key < ? AND seq_end > ? ORDER BY key`, []any{lo, hi, after + 1},
		func(rows *sql.Rows) error {
			if limit > 0 && len(events) == limit {
				return errEnough // read no more rows
			}
			var key, seq int64
			var blob []byte // copied: data keeps parts of it
			var sum sql.NullInt64
			if err := rows.Scan(&key, &seq, &blob, &sum); err != nil {
				return err
			}
			if err := verifyEvents(blob, sum); err != nil {
				return rowError(key, err)
			}
			err := eachEvent(blob, seq, func(e *storedEvent) error {
				if e.seq <= after || (limit > 0 && len(events) == limit) {
					return nil
				}
				ev := sessions.Event{Seq: e.seq, Type: string(e.typ)}
				var corrID *string
				if e.corrID != nil {
					c := string(e.corrID)
					corrID = &c
				}
				rowstore.DecodeEvent(&ev, id, e.time, corrID)
				events, data = append(events, ev), append(data, e.data)
				return nil
			})
			return rowError(key, err)
		})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, fmt.Errorf("events: %w", err)
	}
	dec := rowstore.NewDecoder("event", len(events), func(i int, data []byte) (err error) {
		events[i].Data, err = rowstore.DecodeEventData(k, events[i].Seq, data, nil)
		return err
	})
	for i, d := range data {
		if d != nil {
			dec.Add(i, d)
		}
	}
	if err := dec.Wait(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return events, nil
}
