package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// ReadPage reads one page of a listing in one read transaction
// (rowstore.Pager).
func (b *Backend) ReadPage(ctx context.Context, count string, countArgs []any, query string, args []any,
	each func(scan func(dest ...any) error) error) (int, error) {
	var total int
	err := b.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, count, countArgs...).Scan(&total); err != nil {
			return err
		}
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
// It counts the matches in table sessions, which has every column of a
// filter but updated_at (a write's), through its indexes, without the
// view's join per session.
func (b *Backend) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	count := "sessions"
	if !f.UpdatedBefore.IsZero() || !f.UpdatedAfter.IsZero() || slices.ContainsFunc(f.Conds, fromWrites) {
		count = "session_heads"
	}
	return rowstore.List(ctx, b, b.key, dialect, "session_heads", count, noLimit, f)
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

// ListRuns lists run records, newest first.
func (b *Backend) ListRuns(ctx context.Context, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	return rowstore.ListRuns(ctx, b, "runs", noLimit, f)
}
