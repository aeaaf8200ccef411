package sqlite

import (
	"context"
	"database/sql"
	"strings"
)

// filter is the WHERE clause of a listing (List, ListRuns) and its
// arguments.
type filter struct {
	conds []string
	args  []any
}

// whereIn adds "column IN (values...)" when values is not empty.
func whereIn[S ~string](f *filter, column string, values []S) {
	if len(values) == 0 {
		return
	}
	f.conds = append(f.conds, column+" IN (?"+strings.Repeat(", ?", len(values)-1)+")")
	for _, v := range values {
		f.args = append(f.args, string(v))
	}
}

// where adds the condition cond with its argument.
func (f *filter) where(cond string, arg any) {
	f.conds = append(f.conds, cond)
	f.args = append(f.args, arg)
}

func (f *filter) clause() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.conds, " AND ")
}

// listPage reads one page of a listing in one read transaction: how many
// rows of table match f, and the rows of query+f's clause+order, limit
// (0: all) and offset applied, each read by scan.
func listPage[T any](ctx context.Context, b *Backend, table, query, order string, f *filter, limit, offset int,
	scan func(*sql.Rows) (T, error)) ([]T, int, error) {
	where := f.clause()
	n := int64(-1) // SQLite: no limit
	if limit > 0 {
		n = int64(limit)
	}
	var out []T
	var total int
	err := b.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+table+where, f.args...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query+where+" ORDER BY "+order+" LIMIT ? OFFSET ?", append(f.args, n, offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, total, err
}
