package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// ReadPage reads one page of a listing in one read transaction
// (rowstore.Pager).
func (b *Backend) ReadPage(ctx context.Context, count string, countArgs []any, rowsQuery func(total int) (string, []any),
	each func(scan func(dest ...any) error) error) (int, error) {
	var total int
	err := b.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, count, countArgs...).Scan(&total); err != nil {
			return err
		}
		query, args := rowsQuery(total)
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := each(rows.Scan); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return total, err
}

// noLimit is SQLite's LIMIT for no limit.
const noLimit = int64(-1)

// List returns the sessions matching f, newest first (by creation time,
// then id, descending), and how many match before Limit and Offset. It
// reads view session_heads: each session with its newest write's state.
// A text (Text) is looked up in the text index first (textMatches). It
// counts the matches in table sessions, which has every column of a
// filter but updated_at (a write's), through its indexes, without the
// view's join per session.
func (b *Backend) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	count := "sessions"
	if !f.UpdatedBefore.IsZero() || !f.UpdatedAfter.IsZero() || slices.ContainsFunc(f.Conds, fromWrites) {
		count = "session_heads"
	}
	d := dialect
	if f.Text != "" && b.key == nil { // with a key, the text is matched in Go (rowstore.List)
		sids, ok, err := b.textMatches(ctx, f.Text)
		if err != nil {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		if ok {
			list, _ := json.Marshal(sids)
			d.TextIndex = func(string) (string, []any) { return "sid IN (SELECT value FROM json_each(?))", []any{string(list)} }
		}
	}
	return rowstore.List(ctx, b, b.key, d, "session_heads", count, noLimit, f)
}

// fromWrites reports whether c reads a column of table writes (through
// view session_heads).
func fromWrites(c sessions.WhereCond) bool { return c.Field == "turns" || c.Field == "messages" }

// dialect is SQLite's rowstore.Dialect: metadata is JSON text.
var dialect = rowstore.Dialect{
	MetaString: func(key, value string) (string, []any) {
		path := `$."` + key + `"`
		return "(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)", []any{path, path, value}
	},
}

// textCandidates is the most sessions textMatches lists by rowid.
const textCandidates = 1000

// textMatches returns the rowids (sid) of the sessions whose id or
// label contains text, ignoring case, by the text index (table
// session_text, migration14; it may return a few that the listing's
// LIKE then drops: it folds the case of non-ASCII letters too), or false
// when the index cannot help: text has fewer than three characters
// (the trigram tokenizer matches nothing then) or more than
// textCandidates sessions match. Reading the index stops there, so it
// costs at most that many entries: a rare text is then listed from its
// few sessions, where reading the sessions newest first would read them
// all; a common one is listed by reading the sessions newest first,
// which soon finds a page of them. The rowids are read just before the
// listing's own read transaction: a session given a matching id or
// label in between shows in the next listing, not this one (a
// subquery of the index inside the listing's transaction was measured
// instead: 1.8 times as slow for a rare text, since the count and the
// page then each run the phrase query again, and a phrase reads the
// index entries of each of its trigrams, a common one's too).
func (b *Backend) textMatches(ctx context.Context, text string) ([]int64, bool, error) {
	if utf8.RuneCountInString(text) < 3 {
		return nil, false, nil
	}
	var sids []int64
	err := b.read(ctx, func(tx *sql.Tx) error {
		return eachRow(ctx, tx, `SELECT rowid FROM session_text WHERE session_text MATCH ? LIMIT ?`,
			[]any{`"` + strings.ReplaceAll(text, `"`, `""`) + `"`, textCandidates + 1}, func(rows *sql.Rows) error {
				var sid int64
				err := rows.Scan(&sid)
				sids = append(sids, sid)
				return err
			})
	})
	if err != nil || len(sids) > textCandidates {
		return nil, false, err
	}
	return sids, true, nil
}

// ListRuns lists run records, newest first.
func (b *Backend) ListRuns(ctx context.Context, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	return rowstore.ListRuns(ctx, b, "runs", noLimit, f)
}
