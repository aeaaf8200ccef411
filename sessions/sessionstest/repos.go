package sessionstest

import (
	"errors"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// Repository records (sessions.RepoBackend) are optional: skein serve
// keeps them in its own memory when the backend has none.

// repos returns the backend's RepoBackend, or skips the test.
func (h *harness) repos() sessions.RepoBackend {
	h.t.Helper()
	rb, ok := h.b.(sessions.RepoBackend)
	if !ok {
		h.t.Skipf("%T keeps no repository records (sessions.RepoBackend)", h.b)
	}
	return rb
}

// checkRepos compares the backend's repository listing with want.
func (h *harness) checkRepos(want ...sessions.Repo) {
	h.t.Helper()
	got, err := h.repos().ListRepos(h.ctx())
	if err != nil {
		h.t.Fatalf("ListRepos: %v", err)
	}
	if len(got) != len(want) {
		h.t.Fatalf("ListRepos: %d repositories %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Path != want[i].Path || !got[i].CreatedAt.Equal(want[i].CreatedAt) {
			h.t.Fatalf("ListRepos[%d] = %+v, want %+v", i, got[i], want[i])
		}
		one, err := h.repos().LoadRepo(h.ctx(), want[i].ID)
		if err != nil || one.Path != want[i].Path || !one.CreatedAt.Equal(want[i].CreatedAt) {
			h.t.Fatalf("LoadRepo %s = %+v, %v; want %+v", want[i].ID, one, err, want[i])
		}
	}
}

// testRepos checks repository records: create, a duplicate id, put
// (replacing the path, keeping the creation time), listing by id, load
// and delete of unknown ids.
func testRepos(h *harness) {
	rb, ctx := h.repos(), h.ctx()
	h.checkRepos()
	b := sessions.Repo{ID: "b-repo", Path: "/srv/wörk/b", CreatedAt: at(1)}
	a := sessions.Repo{ID: "a.repo_1", Path: "/srv/work/a", CreatedAt: at(2)}
	for _, r := range []sessions.Repo{b, a} {
		if err := rb.CreateRepo(ctx, &r); err != nil {
			h.t.Fatalf("CreateRepo %s: %v", r.ID, err)
		}
	}
	h.checkRepos(a, b)
	dup := sessions.Repo{ID: a.ID, Path: "/elsewhere", CreatedAt: at(3)}
	if err := rb.CreateRepo(ctx, &dup); !errors.Is(err, sessions.ErrRepoExists) {
		h.t.Fatalf("CreateRepo of a taken id: %v, want ErrRepoExists", err)
	}
	h.checkRepos(a, b)
	if err := rb.PutRepo(ctx, &dup); err != nil {
		h.t.Fatalf("PutRepo: %v", err)
	}
	a.Path = dup.Path
	c := sessions.Repo{ID: "c", Path: "/srv/c", CreatedAt: at(4)}
	if err := rb.PutRepo(ctx, &c); err != nil {
		h.t.Fatalf("PutRepo of a new id: %v", err)
	}
	h.checkRepos(a, b, c)
	if _, err := rb.LoadRepo(ctx, "nope"); !errors.Is(err, sessions.ErrRepoNotFound) {
		h.t.Fatalf("LoadRepo of an unknown id: %v, want ErrRepoNotFound", err)
	}
	if err := rb.DeleteRepo(ctx, "nope"); !errors.Is(err, sessions.ErrRepoNotFound) {
		h.t.Fatalf("DeleteRepo of an unknown id: %v, want ErrRepoNotFound", err)
	}
	if err := rb.DeleteRepo(ctx, b.ID); err != nil {
		h.t.Fatalf("DeleteRepo: %v", err)
	}
	h.checkRepos(a, c)
}

// testReposReopen checks that repository records survive reopening.
func testReposReopen(t *testing.T, open opener) {
	h, closeFn := open()
	r := sessions.Repo{ID: "api", Path: "/srv/work/api", CreatedAt: at(5)}
	if err := h.repos().CreateRepo(h.ctx(), &r); err != nil {
		t.Fatalf("CreateRepo: %v", err)
	}
	closeFn()
	h, _ = open()
	h.checkRepos(r)
}
