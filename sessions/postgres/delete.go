package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
)

// subtree selects the ids of session $1 and all its descendants (UNION:
// a stored cycle ends the walk).
const subtree = `WITH RECURSIVE subtree (id) AS (
	SELECT $1::text COLLATE "C" UNION SELECT s.id FROM skein_sessions s JOIN subtree ON s.parent_id = subtree.id)`

// Delete removes session id with its messages, events and frozen views.
// A session with forks is refused (sessions.ErrHasChildren) unless
// recursive, which deletes its whole subtree in the same transaction; so
// no stored fork ever loses the rows of its shared messages. Frozen views
// of the surviving ancestors that only the deleted sessions used are
// deleted too.
func (b *Backend) Delete(ctx context.Context, id string, recursive bool) error {
	defer b.states.clear()
	err := b.write(ctx, func(tx pgx.Tx) error {
		// Lock the session's row: a fork of it waits, or fails after.
		if _, err := loadState(ctx, tx, id, true); err != nil {
			return err
		}
		if !recursive {
			var forks bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skein_sessions WHERE parent_id = $1)`, id).Scan(&forks); err != nil {
				return err
			}
			if forks {
				return sessions.ErrHasChildren
			}
		}
		// The frozen views the subtree's current and frozen views rest on.
		rows, err := tx.Query(ctx, subtree+`
			SELECT base FROM skein_sessions WHERE id IN (SELECT id FROM subtree) AND base IS NOT NULL
			UNION
			SELECT v.base FROM skein_views v JOIN skein_sessions s USING (sid) WHERE s.id IN (SELECT id FROM subtree) AND v.base IS NOT NULL`, id)
		if err != nil {
			return err
		}
		bases, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		// Messages and events go with their session (trigger
		// skein_sessions_delete, migration 10), views too (ON DELETE
		// CASCADE); the foreign keys on view bases refuse a delete that
		// would leave a stored view without its base.
		if _, err := tx.Exec(ctx, subtree+` DELETE FROM skein_sessions WHERE id IN (SELECT id FROM subtree)`, id); err != nil {
			return err
		}
		for _, vid := range bases {
			if err := release(ctx, tx, vid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return sessions.IDError(id, err)
	}
	return nil
}
