package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/skein-dev/skein/sessions"
)

// view describes a message list (see the package doc): messages
// [baseFrom, baseTo) of the frozen view base (none when base is 0), then
// the owner's own rows from position ownFrom on. A session's current view
// lives in its sessions row; a frozen view is a views row.
type view struct {
	base             int64
	baseFrom, baseTo int64
	ownFrom          int64
}

// baseLen is the number of messages v takes from its base.
func (v view) baseLen() int64 { return v.baseTo - v.baseFrom }

// next is the position of the owner's next own row when v is its current
// view and holds n messages: own rows are exactly [ownFrom, next).
func (v view) next(n int64) int64 { return v.ownFrom + n - v.baseLen() }

// drop returns v without its first d messages (0 <= d <= its length).
func (v view) drop(d int64) view {
	if d < v.baseLen() {
		v.baseFrom += d
		return v
	}
	return view{ownFrom: v.ownFrom + d - v.baseLen()}
}

// baseArg is v.base as a column value (NULL for none).
func (v view) baseArg() any {
	if v.base == 0 {
		return nil
	}
	return v.base
}

// span is a range [from, to) of one session's own message rows.
type span struct {
	sid, from, to int64
}

// spans returns the row ranges that hold the first n messages of v, owned
// by sid, in order. It reads one views row per base it descends into.
func spans(ctx context.Context, tx *sql.Tx, sid int64, v view, n int64) ([]span, error) {
	var out []span // newest range first; reversed at the end
	from, to := int64(0), n
	for {
		bl := v.baseLen()
		if to > bl {
			out = append(out, span{sid, v.ownFrom + max(from-bl, 0), v.ownFrom + to - bl})
		}
		if from >= bl || v.base == 0 {
			break
		}
		from, to = v.baseFrom+from, v.baseFrom+min(to, bl)
		vid := v.base
		var base sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT sid, base, base_from, base_to, own_from FROM views WHERE vid = ?`, vid).
			Scan(&sid, &base, &v.baseFrom, &v.baseTo, &v.ownFrom)
		if err != nil {
			return nil, fmt.Errorf("frozen view %d: %w", vid, err)
		}
		v.base = base.Int64
	}
	slices.Reverse(out)
	return out, nil
}

// loadMessages returns the n messages of the current view v of session
// sid.
func loadMessages(ctx context.Context, tx *sql.Tx, sid int64, v view, n int64) ([]sessions.Message, error) {
	ranges, err := spans(ctx, tx, sid, v, n)
	if err != nil {
		return nil, err
	}
	msgs := make([]sessions.Message, n)
	// Not json.Unmarshal, which would scan each body twice more (validate,
	// then find its end) before calling UnmarshalJSON.
	dec := newDecoder("message", len(msgs), func(i int, body []byte) error { return msgs[i].UnmarshalJSON(body) })
	err = readBodies(ctx, tx, ranges, dec)
	// Wait for the decoder's workers even after a read error.
	if derr := dec.wait(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	return msgs, nil
}

// readBodies hands the message rows of ranges, whose lengths add up to
// dec's item count, to dec in order. It fails if a range is not complete.
func readBodies(ctx context.Context, tx *sql.Tx, ranges []span, dec *decoder) error {
	i := 0
	for _, r := range ranges {
		rows, err := tx.QueryContext(ctx, `SELECT body, crc FROM messages WHERE sid = ? AND pos >= ? AND pos < ? ORDER BY pos`, r.sid, r.from, r.to)
		if err != nil {
			return err
		}
		start := i
		var body sql.RawBytes
		var sum sql.NullInt64
		for rows.Next() {
			if err := rows.Scan(&body, &sum); err != nil {
				rows.Close()
				return err
			}
			if err := verify(i, body, sum); err != nil {
				rows.Close()
				return err
			}
			dec.add(i, body)
			i++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if got := int64(i - start); got != r.to-r.from {
			return fmt.Errorf("message rows [%d, %d) of session row %d: found %d of %d", r.from, r.to, r.sid, got, r.to-r.from)
		}
	}
	return nil
}

// freeze stores v, the current view of session sid, as a frozen view and
// returns its vid.
func freeze(ctx context.Context, tx *sql.Tx, sid int64, v view) (int64, error) {
	var vid int64
	err := tx.QueryRowContext(ctx, `INSERT INTO views (sid, base, base_from, base_to, own_from) VALUES (?, ?, ?, ?, ?) RETURNING vid`,
		sid, v.baseArg(), v.baseFrom, v.baseTo, v.ownFrom).Scan(&vid)
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

// messageRow is a message row to insert: its position and stored body.
type messageRow struct {
	pos  int64
	body storedBody
}

// appendRows appends bodies to rows at positions pos, pos+1, ...
func appendRows(rows []messageRow, pos int64, bodies []storedBody) []messageRow {
	for i, body := range bodies {
		rows = append(rows, messageRow{pos + int64(i), body})
	}
	return rows
}

// insertMessages inserts bodies as session sid's message rows from
// position pos on.
func (b *Backend) insertMessages(ctx context.Context, tx *sql.Tx, sid, pos int64, bodies []storedBody) error {
	return b.insertMessageRows(ctx, tx, sid, appendRows(nil, pos, bodies))
}

// insertMessageRows inserts rows as session sid's messages.
func (b *Backend) insertMessageRows(ctx context.Context, tx *sql.Tx, sid int64, rows []messageRow) error {
	if len(rows) == 0 {
		return nil
	}
	stmt := tx.StmtContext(ctx, b.stmts.insertMessage)
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, sid, r.pos, r.body.json, int64(r.body.sum)); err != nil {
			return err
		}
	}
	return nil
}

// dropLast returns the current view of session sid, which holds n
// messages in view v, without its last d (0 < d <= n). The dropped rows
// stay, as history: the new view's own part starts after every row the
// session has, so later appends never reuse their positions. When the
// kept messages reach into v's own rows, v is frozen first and the new
// view takes its first n-d messages from it: O(1) rows either way.
func dropLast(ctx context.Context, tx *sql.Tx, sid int64, v view, n, d int64) (view, error) {
	keep, next := n-d, v.next(n)
	switch {
	case keep == 0:
		return view{ownFrom: next}, nil
	case keep <= v.baseLen():
		return view{base: v.base, baseFrom: v.baseFrom, baseTo: v.baseFrom + keep, ownFrom: next}, nil
	}
	vid, err := freeze(ctx, tx, sid, v)
	if err != nil {
		return view{}, err
	}
	return view{base: vid, baseTo: keep, ownFrom: next}, nil
}

// verify checks a message row's body against its stored checksum (rows of
// schema versions before 6 have none); index names the message in errors.
func verify(index int, body []byte, sum sql.NullInt64) error {
	if !sum.Valid {
		return nil
	}
	return sessions.VerifyChecksum(index, body, uint32(sum.Int64))
}
