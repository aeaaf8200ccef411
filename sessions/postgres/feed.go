package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

var (
	_ sessions.EventReader     = (*Backend)(nil)
	_ sessions.NotifierBackend = (*Backend)(nil)
	_ sessions.LockerBackend   = (*Backend)(nil)
)

// EventsAfter returns the session's events with seq > after, oldest
// first, at most limit (0: all) (sessions.EventReader).
func (b *Backend) EventsAfter(ctx context.Context, id string, after int64, limit int) ([]sessions.Event, error) {
	var events []sessions.Event
	err := b.read(ctx, func(tx pgx.Tx) error {
		sid, err := sessionRow(ctx, tx, id)
		if err != nil {
			return err
		}
		var lim *int
		if limit > 0 {
			lim = &limit
		}
		rows, err := tx.Query(ctx, `SELECT seq, type, time, corr_id, data, crc FROM skein_events WHERE sid = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sid, after, lim)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e sessions.Event
			var t int64
			var corrID *string
			var sum *int64
			if err := rows.Scan(&e.Seq, &e.Type, &t, &corrID, nil, &sum); err != nil {
				return err
			}
			rowstore.DecodeEvent(&e, id, t, corrID)
			if data := rows.RawValues()[4]; data != nil {
				if err := rowstore.VerifyEventData(e.Seq, data, sum); err != nil {
					return err
				}
				if e.Data, err = rowstore.DecodeEventData(b.key, e.Seq, data, nil); err != nil {
					return fmt.Errorf("event %d: %w", e.Seq, err)
				}
			}
			events = append(events, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, sessions.IDError(id, err)
	}
	return events, nil
}

// LastSeqs returns the seq of the newest event of each stored session of
// ids (sessions.EventReader).
func (b *Backend) LastSeqs(ctx context.Context, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := b.pool.Query(ctx, `SELECT s.id, coalesce((SELECT max(seq) FROM skein_events e WHERE e.sid = s.sid), 0)
		FROM skein_sessions s WHERE s.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: last event seqs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, fmt.Errorf("postgres: last event seqs: %w", err)
		}
		out[id] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: last event seqs: %w", err)
	}
	return out, nil
}
