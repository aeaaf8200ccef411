package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

var _ sessions.RepoBackend = (*Backend)(nil)

// CreateRepo stores a new repository record (sessions.ErrRepoExists).
func (b *Backend) CreateRepo(ctx context.Context, r *sessions.Repo) error {
	created, err := rowstore.EncodeTime(r.CreatedAt)
	if err != nil {
		return err
	}
	return b.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO skein_repos (id, path, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, r.ID, r.Path, created)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
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
	return b.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO skein_repos (id, path, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET path = excluded.path`, r.ID, r.Path, created)
		return err
	})
}

// LoadRepo returns a repository record (sessions.ErrRepoNotFound).
func (b *Backend) LoadRepo(ctx context.Context, id string) (*sessions.Repo, error) {
	r := &sessions.Repo{}
	err := b.read(ctx, func(tx pgx.Tx) error {
		var created int64
		err := tx.QueryRow(ctx, `SELECT id, path, created_at FROM skein_repos WHERE id = $1`, id).Scan(&r.ID, &r.Path, &created)
		if errNoRows(err) {
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
	err := b.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, path, created_at FROM skein_repos ORDER BY id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (sessions.Repo, error) {
			var r sessions.Repo
			var created int64
			err := row.Scan(&r.ID, &r.Path, &created)
			r.CreatedAt = rowstore.DecodeTime(created)
			return r, err
		})
		return err
	})
	return out, err
}

// DeleteRepo removes a repository record (sessions.ErrRepoNotFound).
func (b *Backend) DeleteRepo(ctx context.Context, id string) error {
	return b.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM skein_repos WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return sessions.ErrRepoNotFound
		}
		return nil
	})
}
