package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

var _ sessions.EventReader = (*Backend)(nil)

// EventsAfter returns the session's events with seq > after, oldest
// first, at most limit (0: all) (sessions.EventReader).
func (b *Backend) EventsAfter(ctx context.Context, id string, after int64, limit int) ([]sessions.Event, error) {
	var events []sessions.Event
	err := b.read(ctx, func(tx *sql.Tx) error {
		sid, err := sessionSID(ctx, tx, id)
		if err != nil {
			return err
		}
		events, err = loadEvents(ctx, tx, b.key, sid, id, after, limit)
		return err
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
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	err := b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, seq_end - 1 FROM session_heads WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var seq int64
			if err := rows.Scan(&id, &seq); err != nil {
				return err
			}
			out[id] = seq
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: last event seqs: %w", err)
	}
	return out, nil
}
