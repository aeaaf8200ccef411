package sessions

import (
	"context"
	"slices"
	"strings"
)

var _ RepoBackend = (*MemoryBackend)(nil)

// CreateRepo stores a new repository record in memory.
func (b *MemoryBackend) CreateRepo(_ context.Context, r *Repo) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.repos[r.ID]; ok {
		return ErrRepoExists
	}
	b.putRepo(r)
	return nil
}

// PutRepo stores or replaces a repository record in memory.
func (b *MemoryBackend) PutRepo(_ context.Context, r *Repo) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.repos[r.ID]; ok {
		old.Path = r.Path
		b.repos[r.ID] = old
		return nil
	}
	b.putRepo(r)
	return nil
}

func (b *MemoryBackend) putRepo(r *Repo) {
	if b.repos == nil {
		b.repos = map[string]Repo{}
	}
	b.repos[r.ID] = *r
}

// LoadRepo returns a copy of a repository record.
func (b *MemoryBackend) LoadRepo(_ context.Context, id string) (*Repo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.repos[id]
	if !ok {
		return nil, ErrRepoNotFound
	}
	return &r, nil
}

// ListRepos returns every repository record, by id.
func (b *MemoryBackend) ListRepos(context.Context) ([]Repo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Repo, 0, len(b.repos))
	for _, r := range b.repos {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Repo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteRepo removes a repository record.
func (b *MemoryBackend) DeleteRepo(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.repos[id]; !ok {
		return ErrRepoNotFound
	}
	delete(b.repos, id)
	return nil
}
