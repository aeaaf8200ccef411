package sessions

import (
	"context"
	"errors"
	"time"
)

// Repository records are what skein serve keeps about the repositories
// (working trees) its sessions are bound to: an id, the directory, and
// when it was registered. The store keeps them beside the sessions, so
// that a registration outlives the process and every replica sharing
// the store sees it.

// Errors of repository records, tested with errors.Is.
var (
	ErrRepoNotFound = errors.New("unknown repository id")
	ErrRepoExists   = errors.New("repository already registered")
)

// Repo is one registered repository.
type Repo struct {
	ID string
	// Path is the repository's directory: absolute, clean, its symbolic
	// links resolved when it was registered.
	Path      string
	CreatedAt time.Time
}

// RepoBackend is implemented by backends that keep repository records.
// Every call is atomic.
type RepoBackend interface {
	// CreateRepo stores a new repository (ErrRepoExists if the id is
	// taken).
	CreateRepo(ctx context.Context, r *Repo) error
	// PutRepo stores r, replacing the path of a repository of the same
	// id (its CreatedAt is then kept).
	PutRepo(ctx context.Context, r *Repo) error
	// LoadRepo returns the repository (ErrRepoNotFound).
	LoadRepo(ctx context.Context, id string) (*Repo, error)
	// ListRepos returns every repository, by id.
	ListRepos(ctx context.Context) ([]Repo, error)
	// DeleteRepo removes a repository record (ErrRepoNotFound). The
	// sessions bound to it keep their repoId.
	DeleteRepo(ctx context.Context, id string) error
}
