package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// scripted is a querier whose QueryRow answers with its rows in turn.
type scripted struct{ rows []pgx.Row }

func (s *scripted) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("unexpected Exec")
}

func (s *scripted) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("unexpected Query")
}

func (s *scripted) QueryRow(context.Context, string, ...any) pgx.Row {
	r := s.rows[0]
	s.rows = s.rows[1:]
	return r
}

// rowFunc is a pgx.Row whose Scan is the function.
type rowFunc func(dest ...any) error

func (f rowFunc) Scan(dest ...any) error { return f(dest...) }

// TestReleaseDeleteError checks that release returns the error of its
// DELETE instead of taking it for a view deleted already.
func TestReleaseDeleteError(t *testing.T) {
	boom := errors.New("boom")
	q := &scripted{rows: []pgx.Row{
		rowFunc(func(dest ...any) error { *dest[0].(*bool) = false; return nil }), // not used
		rowFunc(func(...any) error { return boom }),                               // DELETE fails
	}}
	if err := release(t.Context(), q, 7); !errors.Is(err, boom) {
		t.Fatalf("release = %v, want %v", err, boom)
	}
}
