package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/storekey"
)

// rotateBatch is how many writes rows RotateKey reads at a time.
const rotateBatch = 256

// RotateKey seals every payload of the database at path anew with to
// (skein migrate --rotate-key): each one is opened with from (nil when
// the store was plain: plain values are checked against their checksums
// and sealed too; a value sealed with to already is kept readable), all
// in one write transaction, so other processes see the old payloads or
// the new, never a mix, and a failure changes nothing. A value that does
// not open (another key, damage) fails it naming the session. After the
// commit the file is vacuumed and its WAL truncated, so that the old
// ciphertext leaves the file's free pages.
func RotateKey(ctx context.Context, path string, from, to *storekey.Key) (storekey.Rotation, error) {
	var r storekey.Rotation
	if to == nil {
		return r, fmt.Errorf("sqlite: rotate key: no new key")
	}
	b, err := Open(path, WithKey(to))
	if err != nil {
		return r, err
	}
	defer b.Close()
	b.wmu.Lock()
	defer b.wmu.Unlock()
	tx, err := b.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return r, fmt.Errorf("sqlite: rotate key: %w", err)
	}
	defer tx.Rollback()
	ids, err := resealSessions(ctx, tx, from, to, &r)
	if err != nil {
		return r, fmt.Errorf("sqlite: rotate key: %w", err)
	}
	if err := resealWrites(ctx, tx, from, to, ids, &r); err != nil {
		return r, fmt.Errorf("sqlite: rotate key: %w", err)
	}
	if err := resealRuns(ctx, tx, from, to, &r); err != nil {
		return r, fmt.Errorf("sqlite: rotate key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return r, fmt.Errorf("sqlite: rotate key: %w", err)
	}
	for _, q := range []string{"VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return r, fmt.Errorf("sqlite: rotate key: the new key is in place, but %s failed (run it again to drop the old ciphertext from the file): %w", q, err)
		}
	}
	return r, nil
}

// resealSessions reseals the payloads of every sessions row and returns
// the sessions' ids by sid.
func resealSessions(ctx context.Context, tx *sql.Tx, from, to *storekey.Key, r *storekey.Rotation) (map[int64]string, error) {
	type row struct {
		sid int64
		id  string
		s   rowstore.StoredSession
	}
	var list []row
	err := eachRow(ctx, tx, `SELECT sid, id, summary, summary_crc, metadata, metadata_crc, title, title_crc, first_prompt, first_prompt_crc
		FROM sessions ORDER BY sid`, nil, func(rows *sql.Rows) error {
		var x row
		err := rows.Scan(&x.sid, &x.id, &x.s.Summary, &x.s.SummarySum, &x.s.Metadata, &x.s.MetadataSum,
			&x.s.Title, &x.s.TitleSum, &x.s.FirstPrompt, &x.s.FirstPromptSum)
		list = append(list, x)
		return err
	})
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
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET summary = ?, summary_crc = ?, metadata = ?, metadata_crc = ?,
			title = ?, title_crc = ?, first_prompt = ?, first_prompt_crc = ? WHERE sid = ?`,
			n.Summary.Text, n.Summary.Sum, n.Metadata.Text, n.Metadata.Sum, n.Title.Text, n.Title.Sum,
			n.FirstPrompt.Text, n.FirstPrompt.Sum, x.sid); err != nil {
			return nil, sessions.IDError(x.id, err)
		}
		r.Sessions++
	}
	return ids, nil
}

// resealRuns reseals the header and steps of every workflow run record.
func resealRuns(ctx context.Context, tx *sql.Tx, from, to *storekey.Key, r *storekey.Rotation) error {
	type run struct {
		rid  int64
		id   string
		head []byte
	}
	var runs []run
	err := eachRow(ctx, tx, `SELECT rid, id, head FROM runs ORDER BY rid`, nil, func(rows *sql.Rows) error {
		var x run
		err := rows.Scan(&x.rid, &x.id, &x.head)
		runs = append(runs, x)
		return err
	})
	if err != nil {
		return err
	}
	for _, x := range runs {
		head, err := rowstore.ResealRun(from, to, rowstore.FieldRunHead, x.id, "head", x.head)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET head = ? WHERE rid = ?`, head, x.rid); err != nil {
			return err
		}
		type step struct {
			pos  int64
			body []byte
		}
		var steps []step
		err = eachRow(ctx, tx, `SELECT pos, body FROM run_steps WHERE rid = ? ORDER BY pos`, []any{x.rid}, func(rows *sql.Rows) error {
			var s step
			err := rows.Scan(&s.pos, &s.body)
			steps = append(steps, s)
			return err
		})
		if err != nil {
			return err
		}
		for _, s := range steps {
			body, err := rowstore.ResealRun(from, to, rowstore.FieldRunStep, x.id, fmt.Sprintf("step %d", s.pos), s.body)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE run_steps SET body = ? WHERE rid = ? AND pos = ?`, body, x.rid, s.pos); err != nil {
				return err
			}
		}
		r.Runs++
	}
	return nil
}

// resealWrites reseals the message bodies and event data of every writes
// row, rotateBatch rows at a time; ids names the sessions by sid.
func resealWrites(ctx context.Context, tx *sql.Tx, from, to *storekey.Key, ids map[int64]string, r *storekey.Rotation) error {
	type row struct {
		key, pos, seq int64
		msgs, evs     []byte
		evsSum        sql.NullInt64
	}
	after := int64(math.MinInt64)
	for {
		var batch []row
		err := eachRow(ctx, tx, `SELECT key, pos, seq, messages, events, events_crc FROM writes WHERE key > ? ORDER BY key LIMIT ?`,
			[]any{after, rotateBatch}, func(rows *sql.Rows) error {
				var x row
				err := rows.Scan(&x.key, &x.pos, &x.seq, &x.msgs, &x.evs, &x.evsSum)
				batch = append(batch, x)
				return err
			})
		if err != nil || len(batch) == 0 {
			return err
		}
		for _, x := range batch {
			msgs, evs, err := resealRow(from, to, x.pos, x.seq, x.msgs, x.evs, x.evsSum, r)
			if err != nil {
				return sessions.IDError(ids[x.key>>keySessionShift], rowError(x.key, err))
			}
			if _, err := tx.ExecContext(ctx, `UPDATE writes SET messages = ?, events = ?, events_crc = ? WHERE key = ?`,
				msgs, evs, eventsSum(evs), x.key); err != nil {
				return err
			}
		}
		after = batch[len(batch)-1].key
	}
}

// resealRow returns the messages and events blobs of a writes row (its
// first message at pos, its events counted from seq) with every payload
// sealed anew.
func resealRow(from, to *storekey.Key, pos, seq int64, msgs, evs []byte, evsSum sql.NullInt64, r *storekey.Rotation) ([]byte, []byte, error) {
	if err := verifyEvents(evs, evsSum); err != nil {
		return nil, nil, err
	}
	var outMsgs []byte
	err := eachMessage(msgs, func(m storedMessage) error {
		body, err := rowstore.ResealBody(from, to, int(pos), m.body, m.sum)
		if err != nil {
			return err
		}
		var sum *int64
		if !body.Sealed {
			s := int64(body.Sum)
			sum = &s
		}
		outMsgs = appendMessage(outMsgs, body.JSON, sum)
		pos++
		r.Messages++
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var events []rowstore.EventRow
	err = eachEvent(evs, seq, func(e *storedEvent) error {
		re, err := rowstore.ResealJSON(from, to, rowstore.FieldEvent, fmt.Sprintf("event %d data", e.seq), e.data, nil)
		if err != nil {
			return err
		}
		row := rowstore.EventRow{Seq: e.seq, Type: string(e.typ), Time: e.time, Data: re.Text}
		if e.corrID != nil {
			c := string(e.corrID)
			row.CorrID = &c
		}
		if e.pos >= 0 {
			p := e.pos
			row.Pos = &p
		}
		events = append(events, row)
		r.Events++
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	outEvs, err := encodeEvents(nil, seq, events)
	if err != nil {
		return nil, nil, err
	}
	if outMsgs == nil && len(msgs) == 0 {
		outMsgs = msgs
	}
	if outEvs == nil && len(evs) == 0 {
		outEvs = evs
	}
	return outMsgs, outEvs, nil
}
