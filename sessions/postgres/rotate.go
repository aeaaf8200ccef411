package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/storekey"
)

// rotateBatch is how many message or event rows RotateKey reads and
// updates at a time.
const rotateBatch = 1000

// RotateKey seals every payload of the database dsn names anew with to
// (skein migrate --rotate-key): each one is opened with from (nil when
// the store was plain: plain values are checked against their checksums
// and sealed too; a value sealed with to already is kept readable), all
// in one transaction that holds skein's tables locked against writes
// (reads go on), so other processes see the old payloads or the new,
// never a mix, and a failure changes nothing. A value that does not open
// (another key, damage) fails it naming the session. The old row
// versions stay in the tables' files until PostgreSQL vacuums them (see
// docs/security.md).
func RotateKey(ctx context.Context, dsn string, from, to *storekey.Key) (storekey.Rotation, error) {
	var r storekey.Rotation
	if to == nil {
		return r, fmt.Errorf("postgres: rotate key: no new key")
	}
	b, err := Open(ctx, dsn, WithKey(to), WithMaxConns(1))
	if err != nil {
		return r, err
	}
	defer b.Close()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE skein_sessions, skein_messages, skein_events, skein_runs, skein_run_steps IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		ids, err := resealSessions(ctx, tx, from, to, &r)
		if err != nil {
			return err
		}
		if err := resealMessages(ctx, tx, from, to, ids, &r); err != nil {
			return err
		}
		if err := resealEvents(ctx, tx, from, to, ids, &r); err != nil {
			return err
		}
		return resealRuns(ctx, tx, from, to, &r)
	})
	if err != nil {
		return storekey.Rotation{}, fmt.Errorf("postgres: %s: rotate key: %w", b.dsn, redactErr(err, dsn))
	}
	return r, nil
}

// resealSessions reseals the payloads of every session row and returns
// the sessions' ids by sid.
func resealSessions(ctx context.Context, tx pgx.Tx, from, to *storekey.Key, r *storekey.Rotation) (map[int64]string, error) {
	type row struct {
		sid int64
		id  string
		s   rowstore.StoredSession
	}
	var list []row
	err := readRows(ctx, tx, func(rows pgx.Rows) error {
		var x row
		err := rows.Scan(&x.sid, &x.id, &x.s.Summary, &x.s.SummarySum, &x.s.Metadata, &x.s.MetadataSum,
			&x.s.Title, &x.s.TitleSum, &x.s.FirstPrompt, &x.s.FirstPromptSum)
		list = append(list, x)
		return err
	}, `SELECT sid, id, summary, summary_crc, metadata, metadata_crc, title, title_crc, first_prompt, first_prompt_crc
		FROM skein_sessions ORDER BY sid`)
	if err != nil {
		return nil, err
	}
	ids := make(map[int64]string, len(list))
	for _, x := range list {
		ids[x.sid] = x.id
		n, err := rowstore.ResealSession(from, to, &x.s)
		if err != nil {
			return nil, sessions.IDError(x.id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE skein_sessions SET summary = $1, summary_crc = $2, metadata = $3, metadata_crc = $4,
			title = $5, title_crc = $6, first_prompt = $7, first_prompt_crc = $8 WHERE sid = $9`,
			n.Summary.Text, n.Summary.Sum, n.Metadata.Text, n.Metadata.Sum, n.Title.Text, n.Title.Sum,
			n.FirstPrompt.Text, n.FirstPrompt.Sum, x.sid); err != nil {
			return nil, sessions.IDError(x.id, err)
		}
		r.Sessions++
	}
	return ids, nil
}

// resealRuns reseals the header and steps of every workflow run record.
func resealRuns(ctx context.Context, tx pgx.Tx, from, to *storekey.Key, r *storekey.Rotation) error {
	type run struct {
		rid  int64
		id   string
		head []byte
	}
	var runs []run
	err := readRows(ctx, tx, func(rows pgx.Rows) error {
		var x run
		err := rows.Scan(&x.rid, &x.id, &x.head)
		runs = append(runs, x)
		return err
	}, `SELECT rid, id, head FROM skein_runs ORDER BY rid`)
	if err != nil {
		return err
	}
	for _, x := range runs {
		head, err := rowstore.ResealRun(from, to, rowstore.FieldRunHead, x.id, "head", x.head)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE skein_runs SET head = $1 WHERE rid = $2`, head, x.rid); err != nil {
			return err
		}
		var pos []int64
		var bodies []string
		err = readRows(ctx, tx, func(rows pgx.Rows) error {
			var p int64
			var body []byte
			if err := rows.Scan(&p, &body); err != nil {
				return err
			}
			re, err := rowstore.ResealRun(from, to, rowstore.FieldRunStep, x.id, fmt.Sprintf("step %d", p), body)
			pos, bodies = append(pos, p), append(bodies, re)
			return err
		}, `SELECT pos, body FROM skein_run_steps WHERE rid = $1 ORDER BY pos`, x.rid)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE skein_run_steps s SET body = u.body FROM unnest($1::bigint[], $2::text[]) AS u (pos, body)
			WHERE s.rid = $3 AND s.pos = u.pos`, pos, bodies, x.rid); err != nil {
			return err
		}
		r.Runs++
	}
	return nil
}

// resealMessages reseals every message row's body, rotateBatch rows at a
// time in (sid, pos) order.
func resealMessages(ctx context.Context, tx pgx.Tx, from, to *storekey.Key, ids map[int64]string, r *storekey.Rotation) error {
	lastSid, lastPos := int64(math.MinInt64), int64(0)
	for {
		var sids, pos, sums []int64
		var bodies []string
		err := readRows(ctx, tx, func(rows pgx.Rows) error {
			var sid, p, sum int64
			if err := rows.Scan(&sid, &p, nil, &sum); err != nil {
				return err
			}
			body, err := rowstore.ResealBody(from, to, int(p), rows.RawValues()[2], &sum)
			if err != nil {
				return sessions.IDError(ids[sid], err)
			}
			sids, pos, bodies, sums = append(sids, sid), append(pos, p), append(bodies, body.JSON), append(sums, int64(body.Sum))
			return nil
		}, `SELECT sid, pos, body, crc FROM skein_messages WHERE (sid, pos) > ($1, $2) ORDER BY sid, pos LIMIT $3`, lastSid, lastPos, rotateBatch)
		if err != nil || len(sids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE skein_messages m SET body = u.body, crc = u.crc
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS u (sid, pos, body, crc)
			WHERE m.sid = u.sid AND m.pos = u.pos`, sids, pos, bodies, sums); err != nil {
			return err
		}
		r.Messages += len(sids)
		lastSid, lastPos = sids[len(sids)-1], pos[len(pos)-1]
	}
}

// resealEvents reseals every event's data, rotateBatch rows at a time in
// (sid, seq) order.
func resealEvents(ctx context.Context, tx pgx.Tx, from, to *storekey.Key, ids map[int64]string, r *storekey.Rotation) error {
	lastSid, lastSeq := int64(math.MinInt64), int64(0)
	for {
		var sids, seqs []int64
		var data []*string
		var sums []*int64
		err := readRows(ctx, tx, func(rows pgx.Rows) error {
			var sid, seq int64
			var sum *int64
			if err := rows.Scan(&sid, &seq, nil, &sum); err != nil {
				return err
			}
			re, err := rowstore.ResealJSON(from, to, rowstore.FieldEvent, fmt.Sprintf("event %d data", seq), rows.RawValues()[2], sum)
			if err != nil {
				return sessions.IDError(ids[sid], err)
			}
			sids, seqs, data, sums = append(sids, sid), append(seqs, seq), append(data, re.Text), append(sums, re.Sum)
			return nil
		}, `SELECT sid, seq, data, crc FROM skein_events WHERE (sid, seq) > ($1, $2) ORDER BY sid, seq LIMIT $3`, lastSid, lastSeq, rotateBatch)
		if err != nil || len(sids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE skein_events e SET data = u.data, crc = u.crc
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS u (sid, seq, data, crc)
			WHERE e.sid = u.sid AND e.seq = u.seq`, sids, seqs, data, sums); err != nil {
			return err
		}
		r.Events += len(sids)
		lastSid, lastSeq = sids[len(sids)-1], seqs[len(seqs)-1]
	}
}
