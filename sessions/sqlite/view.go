package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// frozenView reads the frozen view vid.
func frozenView(ctx context.Context, tx *sql.Tx, vid int64) (rowstore.Frozen, error) {
	var f rowstore.Frozen
	var base sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT sid, base, base_from, base_to, own_from FROM views WHERE vid = ?`, vid).
		Scan(&f.Owner, &base, &f.View.BaseFrom, &f.View.BaseTo, &f.View.OwnFrom)
	f.View.Base = base.Int64
	return f, err
}

// loadMessages returns the n messages of the current view v of session
// sid.
func loadMessages(ctx context.Context, tx *sql.Tx, k *storekey.Key, sid int64, v rowstore.View, n int64) ([]message.Message, error) {
	ranges, err := rowstore.Spans(sid, v, n, func(vid int64) (rowstore.Frozen, error) { return frozenView(ctx, tx, vid) })
	if err != nil {
		return nil, err
	}
	msgs := make([]message.Message, n)
	// Not json.Unmarshal, which would scan each body twice more (validate,
	// then find its end) before calling UnmarshalJSON.
	dec := rowstore.NewDecoder("message", len(msgs), func(i int, body []byte) error { return rowstore.DecodeMessage(k, &msgs[i], body) })
	err = readBodies(ctx, tx, ranges, dec)
	// Wait for the decoder's workers even after a read error.
	if derr := dec.Wait(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	return msgs, nil
}

// readBodies hands the message rows of ranges, whose lengths add up to
// dec's item count, to dec in order. It fails if a range is not complete.
func readBodies(ctx context.Context, tx *sql.Tx, ranges []rowstore.Span, dec *rowstore.Decoder) error {
	i := 0
	for _, r := range ranges {
		start := i
		lo, hi := sessionKeys(r.Owner)
		err := eachRow(ctx, tx, `SELECT key, pos, messages FROM writes WHERE key >= ? AND key < ? AND pos < ? AND pos_end > ? ORDER BY key`,
			[]any{lo, hi, r.To, r.From}, func(rows *sql.Rows) error {
				var key, pos int64
				var blob sql.RawBytes // dec.Add copies
				if err := rows.Scan(&key, &pos, &blob); err != nil {
					return err
				}
				err := eachMessage(blob, func(m storedMessage) error {
					p := pos
					pos++
					if p < r.From || p >= r.To {
						return nil
					}
					if p != r.From+int64(i-start) {
						return fmt.Errorf("message row %d out of order", p)
					}
					if err := rowstore.Verify(i, m.body, m.sum); err != nil {
						return err
					}
					dec.Add(i, m.body)
					i++
					return nil
				})
				return rowError(key, err)
			})
		if err != nil {
			return err
		}
		if got := int64(i - start); got != r.To-r.From {
			return fmt.Errorf("message rows [%d, %d) of session row %d: found %d of %d", r.From, r.To, r.Owner, got, r.To-r.From)
		}
	}
	return nil
}

// freeze stores v, the current view of session sid, as a frozen view and
// returns its vid.
func freeze(ctx context.Context, tx *sql.Tx, sid int64, v rowstore.View) (int64, error) {
	var vid int64
	err := tx.QueryRowContext(ctx, `INSERT INTO views (sid, base, base_from, base_to, own_from) VALUES (?, ?, ?, ?, ?) RETURNING vid`,
		sid, v.BaseArg(), v.BaseFrom, v.BaseTo, v.OwnFrom).Scan(&vid)
	return vid, err
}

// release deletes the frozen view vid if nothing references it any more,
// then does the same for its base, and so on down the chain.
func release(ctx context.Context, tx *sql.Tx, vid int64) error {
	for vid != 0 {
		var used bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE base = ?1) OR EXISTS (SELECT 1 FROM views WHERE base = ?1)`, vid).Scan(&used)
		if err != nil || used {
			return err
		}
		var base sql.NullInt64
		err = tx.QueryRowContext(ctx, `DELETE FROM views WHERE vid = ? RETURNING base`, vid).Scan(&base)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // deleted already, with its owner
		}
		if err != nil {
			return err
		}
		vid = base.Int64
	}
	return nil
}

// nullInt is a nullable integer column as rowstore takes it.
func nullInt(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}
