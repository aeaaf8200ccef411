package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// exists reports whether session id is stored.
func exists(ctx context.Context, q querier, id string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skein_sessions WHERE id = $1)`, id).Scan(&ok)
	return ok, err
}

// Exists reports whether session id is stored.
func (b *Backend) Exists(ctx context.Context, id string) (bool, error) {
	ok, err := exists(ctx, b.pool, id)
	if err != nil {
		return false, sessions.IDError(id, err)
	}
	return ok, nil
}

// Load returns the session's full state (sessions.ErrNotFound).
func (b *Backend) Load(ctx context.Context, id string) (*sessions.Record, error) {
	var rec *sessions.Record
	err := b.read(ctx, func(tx pgx.Tx) error {
		r, st, err := loadRecord(ctx, tx, b.key, id)
		if err != nil {
			return err
		}
		if r.Messages, err = loadMessages(ctx, tx, b.key, st); err != nil {
			return sessions.IDError(id, err)
		}
		b.states.put(id, *st)
		if r.Events, err = loadEvents(ctx, tx, b.key, st.Row, id); err != nil {
			return sessions.IDError(id, err)
		}
		rec = r
		return nil
	})
	return rec, err
}

// LoadTranscript returns the session's state without its event log, and
// the seq of the log's newest event (sessions.ErrNotFound).
func (b *Backend) LoadTranscript(ctx context.Context, id string) (*sessions.Record, int64, error) {
	var rec *sessions.Record
	var lastSeq int64
	err := b.read(ctx, func(tx pgx.Tx) error {
		r, st, err := loadRecord(ctx, tx, b.key, id)
		if err != nil {
			return err
		}
		if r.Messages, err = loadMessages(ctx, tx, b.key, st); err != nil {
			return sessions.IDError(id, err)
		}
		b.states.put(id, *st)
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM skein_events WHERE sid = $1`, st.Row).Scan(&lastSeq); err != nil {
			return sessions.IDError(id, fmt.Errorf("events: %w", err))
		}
		rec = r
		return nil
	})
	return rec, lastSeq, err
}

// sessionRow reads the row id of session id (sessions.ErrNotFound).
func sessionRow(ctx context.Context, q querier, id string) (int64, error) {
	var sid int64
	err := q.QueryRow(ctx, `SELECT sid FROM skein_sessions WHERE id = $1`, id).Scan(&sid)
	if errNoRows(err) {
		err = sessions.ErrNotFound
	}
	if err != nil {
		return 0, sessions.IDError(id, err)
	}
	return sid, nil
}

// LoadEvents returns the session's event log, oldest first
// (sessions.ErrNotFound).
func (b *Backend) LoadEvents(ctx context.Context, id string) ([]sessions.Event, error) {
	var events []sessions.Event
	err := b.read(ctx, func(tx pgx.Tx) error {
		sid, err := sessionRow(ctx, tx, id)
		if err != nil {
			return err
		}
		if events, err = loadEvents(ctx, tx, b.key, sid, id); err != nil {
			return sessions.IDError(id, err)
		}
		return nil
	})
	return events, err
}

// LoadAppended returns the messages the session's "message" events
// appended, by the events' seq, including those no longer in its current
// message list (sessions.HistoryBackend, sessions.ErrNotFound).
func (b *Backend) LoadAppended(ctx context.Context, id string) (map[int64]message.Message, error) {
	var out map[int64]message.Message
	err := b.read(ctx, func(tx pgx.Tx) error {
		sid, err := sessionRow(ctx, tx, id)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM skein_events WHERE sid = $1 AND pos IS NOT NULL`, sid).Scan(&n); err != nil {
			return sessions.IDError(id, err)
		}
		seqs := make([]int64, n)
		msgs := make([]message.Message, n)
		dec := rowstore.NewDecoder("message", n, func(i int, body []byte) error { return rowstore.DecodeMessage(b.key, &msgs[i], body) })
		i := 0
		err = readRows(ctx, tx, func(rows pgx.Rows) error {
			if i == n {
				return fmt.Errorf("more than %d rows", n)
			}
			var sum int64
			if err := rows.Scan(&seqs[i], nil, &sum); err != nil {
				return err
			}
			body := rows.RawValues()[1]
			if err := rowstore.Verify(i, body, &sum); err != nil {
				return err
			}
			dec.Add(i, body)
			i++
			return nil
		}, `SELECT e.seq, m.body, m.crc FROM skein_events e JOIN skein_messages m ON m.sid = e.sid AND m.pos = e.pos
			WHERE e.sid = $1 AND e.pos IS NOT NULL ORDER BY e.seq`, sid)
		if err == nil && i != n {
			err = fmt.Errorf("read %d rows, want %d", i, n)
		}
		if derr := dec.Wait(); err == nil {
			err = derr
		}
		if err != nil {
			return sessions.IDError(id, fmt.Errorf("appended messages: %w", err))
		}
		out = make(map[int64]message.Message, n)
		for i, seq := range seqs {
			out[seq] = msgs[i]
		}
		return nil
	})
	return out, err
}

// LoadMeta returns the session's state without messages and events
// (sessions.ErrNotFound).
func (b *Backend) LoadMeta(ctx context.Context, id string) (*sessions.Record, error) {
	var rec *sessions.Record
	err := b.read(ctx, func(tx pgx.Tx) error {
		r, _, err := loadRecord(ctx, tx, b.key, id)
		rec = r
		return err
	})
	return rec, err
}

var _ sessions.VersionReader = (*Backend)(nil)

// versionSQL reads a session's version and creation time by id.
const versionSQL = `SELECT version, created_at FROM skein_sessions WHERE id = $1`

// StoredVersion reads session id's version and creation time in one
// round trip (one statement, outside a transaction).
func (b *Backend) StoredVersion(ctx context.Context, id string) (int64, time.Time, error) {
	var version, created int64
	err := b.pool.QueryRow(ctx, versionSQL, id).Scan(&version, &created)
	if errNoRows(err) {
		return 0, time.Time{}, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return 0, time.Time{}, sessions.IDError(id, err)
	}
	return version, rowstore.DecodeTime(created), nil
}

// loadRecord reads session id's row and children.
func loadRecord(ctx context.Context, tx pgx.Tx, k *storekey.Key, id string) (*sessions.Record, *rowstore.State, error) {
	var s rowstore.StoredSession
	var base *int64
	var children []string
	err := tx.QueryRow(ctx, `SELECT sid, status, created_at, updated_at, summary, metadata, parent_id,
			branched_at, turns, max_turns, version, base, base_from, base_to, own_from, length, title, first_prompt,
			ARRAY(SELECT c.id FROM skein_sessions c WHERE c.parent_id = s.id ORDER BY c.sid),
			summary_crc, metadata_crc, title_crc, first_prompt_crc
		FROM skein_sessions s WHERE id = $1`, id).
		Scan(&s.State.Row, &s.Status, &s.Created, &s.Updated, &s.Summary, &s.Metadata, &s.ParentID,
			&s.Branched, &s.Turns, &s.MaxTurns, &s.State.Version, &base, &s.State.View.BaseFrom, &s.State.View.BaseTo,
			&s.State.View.OwnFrom, &s.State.Length, &s.Title, &s.FirstPrompt, &children,
			&s.SummarySum, &s.MetadataSum, &s.TitleSum, &s.FirstPromptSum)
	if errNoRows(err) {
		return nil, nil, sessions.IDError(id, sessions.ErrNotFound)
	}
	if err != nil {
		return nil, nil, sessions.IDError(id, err)
	}
	if base != nil {
		s.State.View.Base = *base
	}
	rec, err := s.Record(k, id)
	if err != nil {
		return nil, nil, err
	}
	if len(children) > 0 {
		rec.ChildIDs = children
	}
	return rec, &s.State, nil
}

// loadMessages returns the current messages of the session whose state is
// st.
func loadMessages(ctx context.Context, tx pgx.Tx, k *storekey.Key, st *rowstore.State) ([]message.Message, error) {
	frozen, err := frozenViews(ctx, tx, st.View.Base)
	if err != nil {
		return nil, err
	}
	spans, err := rowstore.Spans(st.Row, st.View, st.Length, func(vid int64) (rowstore.Frozen, error) {
		f, ok := frozen[vid]
		if !ok {
			return f, fmt.Errorf("not stored")
		}
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	msgs := make([]message.Message, st.Length)
	dec := rowstore.NewDecoder("message", len(msgs), func(i int, body []byte) error { return rowstore.DecodeMessage(k, &msgs[i], body) })
	i := 0
	for _, sp := range spans {
		start := i
		err := readRows(ctx, tx, func(rows pgx.Rows) error {
			if i == len(msgs) {
				return fmt.Errorf("more rows than the session's %d messages", len(msgs))
			}
			var sum int64
			if err := rows.Scan(nil, &sum); err != nil {
				return err
			}
			body := rows.RawValues()[0]
			if err := rowstore.Verify(i, body, &sum); err != nil {
				return err
			}
			dec.Add(i, body)
			i++
			return nil
		}, `SELECT body, crc FROM skein_messages WHERE sid = $1 AND pos >= $2 AND pos < $3 ORDER BY pos`, sp.Owner, sp.From, sp.To)
		if err == nil && int64(i-start) != sp.To-sp.From {
			err = fmt.Errorf("message rows [%d, %d) of session row %d: found %d of %d", sp.From, sp.To, sp.Owner, i-start, sp.To-sp.From)
		}
		if err != nil {
			dec.Wait()
			return nil, fmt.Errorf("messages: %w", err)
		}
	}
	if err := dec.Wait(); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	return msgs, nil
}

// frozenViews reads the chain of frozen views from vid down, in one
// query, by id (none for vid 0).
func frozenViews(ctx context.Context, tx pgx.Tx, vid int64) (map[int64]rowstore.Frozen, error) {
	out := map[int64]rowstore.Frozen{}
	if vid == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `WITH RECURSIVE chain AS (
			SELECT vid, sid, base, base_from, base_to, own_from FROM skein_views WHERE vid = $1
			UNION
			SELECT v.vid, v.sid, v.base, v.base_from, v.base_to, v.own_from FROM skein_views v JOIN chain c ON v.vid = c.base)
		SELECT vid, sid, base, base_from, base_to, own_from FROM chain`, vid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var f rowstore.Frozen
		var base *int64
		if err := rows.Scan(&id, &f.Owner, &base, &f.View.BaseFrom, &f.View.BaseTo, &f.View.OwnFrom); err != nil {
			return nil, err
		}
		if base != nil {
			f.View.Base = *base
		}
		out[id] = f
	}
	return out, rows.Err()
}

// readRows runs query and calls row for each row, stopping at the first
// error.
func readRows(ctx context.Context, tx pgx.Tx, row func(pgx.Rows) error, query string, args ...any) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// loadEvents reads session row sid's event log, oldest first.
func loadEvents(ctx context.Context, tx pgx.Tx, k *storekey.Key, sid int64, id string) ([]sessions.Event, error) {
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM skein_events WHERE sid = $1`, sid).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	events := make([]sessions.Event, n)
	dec := rowstore.NewDecoder("event", n, func(i int, data []byte) (err error) {
		events[i].Data, err = rowstore.DecodeEventData(k, events[i].Seq, data, nil)
		return err
	})
	rows, err := tx.Query(ctx, `SELECT seq, type, time, corr_id, data, crc FROM skein_events WHERE sid = $1 ORDER BY seq`, sid)
	if err != nil {
		dec.Wait()
		return nil, fmt.Errorf("events: %w", err)
	}
	i := 0
	for ; i < n && rows.Next(); i++ {
		e := &events[i]
		var t int64
		var corrID *string
		var sum *int64
		if err = rows.Scan(&e.Seq, &e.Type, &t, &corrID, nil, &sum); err != nil {
			break
		}
		rowstore.DecodeEvent(e, id, t, corrID)
		if data := rows.RawValues()[4]; data != nil {
			if err = rowstore.VerifyEventData(e.Seq, data, sum); err != nil {
				break
			}
			dec.Add(i, data)
		}
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
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

// numbered returns query with its ? placeholders numbered $1, $2, ...
// (rowstore.Filter writes ?; the queries here hold no ? of their own).
func numbered(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ReadPage reads one page of a listing in one read transaction
// (rowstore.Pager), numbering the queries' placeholders.
func (b *Backend) ReadPage(ctx context.Context, count string, countArgs []any, rowsQuery func(total int) (string, []any),
	each func(scan func(dest ...any) error) error) (int, error) {
	var total int
	err := b.read(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, numbered(count), countArgs...).Scan(&total); err != nil {
			return err
		}
		query, args := rowsQuery(total)
		return readRows(ctx, tx, func(rows pgx.Rows) error { return each(rows.Scan) }, numbered(query), args...)
	})
	return total, err
}

// List returns the sessions matching f, newest first (by creation time,
// then id, descending), and how many match before Limit and Offset.
func (b *Backend) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	return rowstore.List(ctx, b, b.key, dialect, "skein_sessions", "skein_sessions", nil, f)
}

// dialect is PostgreSQL's rowstore.Dialect. A text search with few
// matches is sorted (FewOrder): the planner's estimate of how many
// sessions a LIKE '%text%' matches is a guess, and when it guesses more
// than there are, it reads the sessions newest first (for 1 match in
// 10,000, all of them: 15 ms) instead of the few the trigram index
// finds (0.2 ms).
var dialect = rowstore.Dialect{
	MetaString: func(key, value string) (string, []any) {
		return "(meta -> ?::text) = to_jsonb(?::text)", []any{key, value}
	},
	FewOrder: "created_at + 0 DESC, id DESC",
}

// ListRuns lists run records, newest first.
func (b *Backend) ListRuns(ctx context.Context, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	return rowstore.ListRuns(ctx, b, "skein_runs", nil, f)
}
