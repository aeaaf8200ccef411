package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

var _ sessions.RepoBackend = (*Backend)(nil)

// CreateRepo stores a new repository record.
func (b *Backend) CreateRepo(ctx context.Context, r *sessions.Repo) error {
	created, err := rowstore.EncodeTime(r.CreatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO repos (id, path, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING", r.ID, r.Path, created)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return sessions.ErrRepoExists
		}
		return nil
	})
}

// PutRepo stores a repository record or replaces its path.
func (b *Backend) PutRepo(ctx context.Context, r *sessions.Repo) error {
	created, err := rowstore.EncodeTime(r.CreatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO repos (id, path, created_at) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET path = excluded.path", r.ID, r.Path, created)
		return err
	})
}

// LoadRepo returns a repository record.
func (b *Backend) LoadRepo(ctx context.Context, id string) (*sessions.Repo, error) {
	r := &sessions.Repo{}
	err := b.read(ctx, func(tx *sql.Tx) error {
		var created int64
		err := tx.QueryRowContext(ctx, "SELECT id, path, created_at FROM repos WHERE id = ?", id).Scan(&r.ID, &r.Path, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return sessions.ErrRepoNotFound
		}
		r.CreatedAt = rowstore.DecodeTime(created)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ListRepos returns every repository record, by id.
func (b *Backend) ListRepos(ctx context.Context) ([]sessions.Repo, error) {
	var out []sessions.Repo
	err := b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, path, created_at FROM repos ORDER BY id")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r sessions.Repo
			var created int64
			if err := rows.Scan(&r.ID, &r.Path, &created); err != nil {
				return err
			}
			r.CreatedAt = rowstore.DecodeTime(created)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteRepo removes a repository record.
func (b *Backend) DeleteRepo(ctx context.Context, id string) error {
	return b.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM repos WHERE id = ?", id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return sessions.ErrRepoNotFound
		}
		return nil
	})
}
