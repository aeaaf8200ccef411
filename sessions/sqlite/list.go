package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// listPage reads one page of a listing in one read transaction: how many
// rows of table match f, and columns of those rows (the table aliased s)
// in rowstore.ListOrder, limit (0: all) and offset applied, each scanned
// into the targets of a new row.
func listPage[R any](ctx context.Context, b *Backend, table, columns string, f *rowstore.Filter, limit, offset int,
	newRow func() (*R, []any)) ([]*R, int, error) {
	where := f.Clause()
	n := int64(-1) // SQLite: no limit
	if limit > 0 {
		n = int64(limit)
	}
	var out []*R
	var total int
	err := b.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+table+where, f.Args...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+columns+" FROM "+table+" s"+where+" ORDER BY "+rowstore.ListOrder+" LIMIT ? OFFSET ?",
			append(f.Args, n, offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, targets := newRow()
			if err := rows.Scan(targets...); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, total, err
}

// List returns the sessions matching f, newest first (by creation time,
// then id, descending), and how many match before Limit and Offset.
func (b *Backend) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	q, err := rowstore.SessionFilter(f)
	if err != nil {
		return nil, 0, err
	}
	rows, total, err := listPage(ctx, b, "sessions", fmt.Sprintf(rowstore.SummaryColumns, "sessions"), q, f.Limit, f.Offset,
		func() (*rowstore.SummaryRow, []any) { r := &rowstore.SummaryRow{}; return r, r.Targets() })
	if err != nil {
		return nil, 0, fmt.Errorf("list: %w", err)
	}
	out := make([]sessions.Summary, len(rows))
	for i, r := range rows {
		if out[i], err = r.Summary(); err != nil {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
	}
	return out, total, nil
}

// ListRuns lists run records, newest first.
func (b *Backend) ListRuns(ctx context.Context, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	rows, total, err := listPage(ctx, b, "runs", rowstore.RunColumns, rowstore.RunFilter(f), f.Limit, f.Offset,
		func() (*rowstore.RunRow, []any) { r := &rowstore.RunRow{}; return r, r.Targets() })
	if err != nil {
		return nil, 0, fmt.Errorf("list runs: %w", err)
	}
	out := make([]sessions.RunSummary, len(rows))
	for i, r := range rows {
		out[i] = r.Summary()
	}
	return out, total, nil
}
