package sqlite

import (
	"context"
	"database/sql"

	"github.com/skein-dev/skein/sessions"
)

// subtree selects the ids of session ?1 and all its descendants.
const subtree = `WITH RECURSIVE subtree (id) AS (
	SELECT ?1 UNION SELECT s.id FROM sessions s JOIN subtree ON s.parent_id = subtree.id)`

// Delete removes session id with its writes rows (its messages and
// events) and frozen views.
// A session with forks is refused (sessions.ErrHasChildren) unless
// recursive, which deletes its whole subtree in the same transaction; so
// no stored fork ever loses the rows of its shared messages. Frozen views
// of the surviving ancestors that only the deleted sessions used are
// deleted too.
func (b *Backend) Delete(ctx context.Context, id string, recursive bool) error {
	err := b.write(ctx, func(tx *sql.Tx) error {
		if ok, err := exists(ctx, tx, id); err != nil || !ok {
			if err == nil {
				err = sessions.ErrNotFound
			}
			return err
		}
		if !recursive {
			var forks bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE parent_id = ?)`, id).Scan(&forks); err != nil {
				return err
			}
			if forks {
				return sessions.ErrHasChildren
			}
		}
		// The frozen views the subtree's current and frozen views rest on.
		rows, err := tx.QueryContext(ctx, subtree+`
			SELECT base FROM sessions WHERE id IN subtree AND base IS NOT NULL
			UNION
			SELECT v.base FROM views v JOIN sessions s USING (sid) WHERE s.id IN subtree AND v.base IS NOT NULL`, id)
		if err != nil {
			return err
		}
		var bases []int64
		for rows.Next() {
			var vid int64
			if err := rows.Scan(&vid); err != nil {
				rows.Close()
				return err
			}
			bases = append(bases, vid)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		// A session's writes rows are a range of keys (see writeKey);
		// its views go with it (ON DELETE CASCADE), and the foreign keys
		// on view bases refuse a delete that would leave a stored view
		// without its base.
		var sids []int64
		err = eachRow(ctx, tx, subtree+` SELECT sid FROM sessions WHERE id IN subtree`, []any{id}, func(rows *sql.Rows) error {
			var sid int64
			err := rows.Scan(&sid)
			sids = append(sids, sid)
			return err
		})
		if err != nil {
			return err
		}
		for _, sid := range sids {
			lo, hi := sessionKeys(sid)
			if _, err := tx.ExecContext(ctx, `DELETE FROM writes WHERE key >= ? AND key < ?`, lo, hi); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, subtree+` DELETE FROM sessions WHERE id IN subtree`, id); err != nil {
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
