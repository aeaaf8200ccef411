package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/workspace"
)

// Repositories (seed 001's Repo table): a session created with a repoId
// is bound to that registered repository, a directory inside the
// workspace root, and its agent's files and commands work there. The
// records live in the store (sessions.RepoBackend), so registrations
// outlive the process and every replica sharing the store sees them.

// maxRepoIDLength bounds a repository id.
const maxRepoIDLength = 128

// checkRepoID refuses a malformed repository id: 1 to 128 letters,
// digits and -_., starting with a letter or digit (so never "." or "..",
// and never a path).
func checkRepoID(field, id string) *apiError {
	ok := id != "" && len(id) <= maxRepoIDLength
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("-_.", c)) {
			ok = false
			break
		}
	}
	if !ok {
		return errorf(http.StatusBadRequest, "bad_field", "field %s must be a repository id: 1 to %d letters, digits and -_., starting with a letter or digit (got %q)", field, maxRepoIDLength, truncate(id, 60))
	}
	return nil
}

// pathLike reports whether a refused repository id looks like an attempt
// to name a path (a traversal attempt, logged as a security event).
func pathLike(id string) bool {
	return strings.Contains(id, "..") || strings.ContainsAny(id, `/\`) || strings.ContainsRune(id, 0)
}

// repoJSON is the JSON form of a repository.
type repoJSON struct {
	ID        string `json:"id"`
	Path      string `json:"path"`
	CreatedAt string `json:"createdAt"`
}

func toRepoJSON(r *sessions.Repo) *repoJSON {
	return &repoJSON{ID: r.ID, Path: r.Path, CreatedAt: formatTime(r.CreatedAt)}
}

// repoRequest is the body of POST /api/repos.
type repoRequest struct {
	ID   *string `json:"id"`
	Path *string `json:"path"`
}

// security logs a refusal of a security rule: a path escaping the
// workspace root, a repository id that is a path, a tool call the
// session's workspace refused.
func (s *Server) security(msg, action, rule, reason string, attrs ...any) {
	s.log.Warn("security: "+msg, append([]any{"decision", "deny", "action", action, "rule", rule, "reason", reason}, attrs...)...)
}

// checkRepoPath resolves a repository path (what names it in messages):
// a relative path is relative to the workspace root; the path is cleaned
// and its symbolic links resolved, and must be an existing directory
// inside the root (workspace.DirInside). It returns the resolved path. A
// path that leads out of the root (through "..", an absolute path or a
// symbolic link) is a 400 path_outside_root and a security event in the
// log.
func (s *Server) checkRepoPath(what, given string, attrs ...any) (string, error) {
	if s.root == "" {
		return "", errorf(http.StatusConflict, "no_workspace_root", "this server has no workspace root (start it with --workspace-root DIR or AGENT_WORKSPACE_ROOT): no repository can be registered")
	}
	if given == "" {
		return "", errorf(http.StatusBadRequest, "bad_field", "%s must not be empty", what)
	}
	real, err := workspace.DirInside(s.root, given)
	switch {
	case errors.Is(err, workspace.ErrNotAllowed):
		s.security("repository path outside the workspace root", "register "+given, "workspace root", err.Error(), attrs...)
		return "", errorf(http.StatusBadRequest, "path_outside_root", "%s: %v (AGENT_WORKSPACE_ROOT, --workspace-root)", what, err)
	case errors.Is(err, fs.ErrNotExist):
		return "", errorf(http.StatusBadRequest, "bad_path", "%s: no directory %q", what, truncate(given, 200))
	case err != nil:
		return "", errorf(http.StatusBadRequest, "bad_path", "%s: %v", what, err)
	}
	return real, nil
}

// openRepos sets up the repositories at New: the workspace root,
// resolved, and the repositories of Config.Repos, registered (or their
// path changed) in the store.
func (s *Server) openRepos(ctx context.Context) error {
	if rb, ok := s.store.Backend().(sessions.RepoBackend); ok {
		s.repos = rb
	} else {
		s.repos = sessions.NewMemoryBackend() // kept for the process only
	}
	if s.cfg.WorkspaceRoot != "" {
		// the root made absolute, clean and its links resolved, as a
		// workspace's
		p, err := workspace.New(workspace.Config{Root: s.cfg.WorkspaceRoot})
		if err != nil {
			return err
		}
		s.root = p.Root()
	}
	ids := make([]string, 0, len(s.cfg.Repos))
	for id := range s.cfg.Repos {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if e := checkRepoID("id", id); e != nil {
			return fmt.Errorf("repository %q: %s", id, e.message)
		}
		path, err := s.checkRepoPath("repository "+id, s.cfg.Repos[id])
		if err != nil {
			return errors.New(errMessage(err))
		}
		old, err := s.repos.LoadRepo(ctx, id)
		switch {
		case errors.Is(err, sessions.ErrRepoNotFound):
			err = s.repos.CreateRepo(ctx, &sessions.Repo{ID: id, Path: path, CreatedAt: time.Now()})
			s.log.Info("repository registered", "repo", id, "path", path)
		case err == nil && old.Path != path:
			err = s.repos.PutRepo(ctx, &sessions.Repo{ID: id, Path: path, CreatedAt: old.CreatedAt})
			s.log.Info("repository path changed", "repo", id, "path", path, "previous", old.Path)
		}
		if err != nil {
			return fmt.Errorf("repository %s: %w", id, err)
		}
	}
	return nil
}

// errMessage is the message of an apiError, else err's text.
func errMessage(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.message
	}
	return err.Error()
}

// lookupRepo returns the registered repository id names: a 400 for a
// malformed id (a path-like one is also logged as a security event), a
// 404 for an unknown one.
func (s *Server) lookupRepo(ctx context.Context, field, id string) (*sessions.Repo, error) {
	if e := checkRepoID(field, id); e != nil {
		if pathLike(id) {
			s.security("repository id names a path", "bind repo "+truncate(id, 60), "repository ids", "a repository id names a registered repository, not a path")
		}
		return nil, e
	}
	r, err := s.repos.LoadRepo(ctx, id)
	if errors.Is(err, sessions.ErrRepoNotFound) {
		return nil, errorf(http.StatusNotFound, "unknown_repo", "unknown repository '%s' (register it with POST /api/repos or skein serve --repo %s=PATH)", id, id)
	}
	return r, err
}

// repoWorkspace returns the workspace policy of a session bound to
// repository r: the server's policy (its tier and allowlists) rooted at
// the repository. The repository's path is checked again: it must still
// resolve inside the workspace root (a directory swapped for a link that
// leads out is refused: 409, and escaped reports it, for the caller to
// record as a security event).
func (s *Server) repoWorkspace(r *sessions.Repo) (p *workspace.Policy, escaped bool, err error) {
	if s.root == "" {
		return nil, false, errorf(http.StatusConflict, "repo_unavailable", "repository '%s': this server has no workspace root (AGENT_WORKSPACE_ROOT, --workspace-root)", r.ID)
	}
	real, err := workspace.DirInside(s.root, r.Path)
	if errors.Is(err, workspace.ErrNotAllowed) {
		return nil, true, errorf(http.StatusConflict, "repo_unavailable", "repository '%s': %v (AGENT_WORKSPACE_ROOT, --workspace-root)", r.ID, err)
	}
	if err != nil {
		return nil, false, errorf(http.StatusConflict, "repo_unavailable", "repository '%s': %v", r.ID, err)
	}
	if s.cfg.Workspace != nil {
		p, err = s.cfg.Workspace.WithRoot(real)
	} else {
		p, err = workspace.New(workspace.Config{Root: real})
	}
	if err != nil {
		return nil, false, errorf(http.StatusConflict, "repo_unavailable", "repository '%s': %v", r.ID, err)
	}
	return p, false, nil
}

// sessionRepo returns the repository session rec is bound to, or nil.
func (s *Server) sessionRepo(ctx context.Context, rec *sessions.Record) (*sessions.Repo, error) {
	id := strOf(rec.Metadata, metaRepoID)
	if id == "" {
		return nil, nil
	}
	r, err := s.repos.LoadRepo(ctx, id)
	if errors.Is(err, sessions.ErrRepoNotFound) {
		return nil, errorf(http.StatusConflict, "unknown_repo", "session '%s' is bound to repository '%s', which is not registered (register it with POST /api/repos or skein serve --repo %s=PATH)", rec.ID, id, id)
	}
	return r, err
}

// turnWorkspace gives turn t of session rec its workspace: the
// repository the session is bound to, if any. A repository that is gone
// or now leads out of the workspace root refuses the turn (409); the
// latter is also recorded as a security_decision event of the session.
func (s *Server) turnWorkspace(ctx context.Context, rec *sessions.Record, t *turn) error {
	r, err := s.sessionRepo(ctx, rec)
	if err != nil || r == nil {
		return err
	}
	p, escaped, err := s.repoWorkspace(r)
	if escaped {
		// recorded in the session's log (the forensic log's
		// security_decision record); the observer logs it too
		ev := sessions.NewEvent(agent.EventSecurityDecision, map[string]any{"decision": "deny", "action": "bind repo " + r.ID,
			"rule": "workspace root", "reason": errMessage(err)})
		if _, aerr := s.store.Apply(ctx, rec.ID, &sessions.Change{Events: []sessions.Event{ev}}); aerr != nil {
			s.log.Error("recording a security decision failed", "id", rec.ID, "err", aerr)
		}
	}
	if err != nil {
		return err
	}
	t.ctx = workspace.NewContext(t.ctx, p)
	return nil
}

// listRepos handles GET /api/repos.
func (s *Server) listRepos(w http.ResponseWriter, r *http.Request) error {
	list, err := s.repos.ListRepos(r.Context())
	if err != nil {
		return err
	}
	out := make([]*repoJSON, len(list))
	for i := range list {
		out[i] = toRepoJSON(&list[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"repos": out, "workspaceRoot": s.root})
	return nil
}

// getRepo handles GET /api/repos/{id}.
func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) error {
	rp, err := s.lookupRepo(r.Context(), "id", r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRepoJSON(rp))
	return nil
}

// createRepo handles POST /api/repos {id, path}: 201 the repository; 200
// when the id is registered with that path already; 409 when it is
// registered with another path.
func (s *Server) createRepo(w http.ResponseWriter, r *http.Request) error {
	var req repoRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	switch {
	case req.ID == nil:
		return errorf(http.StatusBadRequest, "bad_field", "field id is required")
	case req.Path == nil:
		return errorf(http.StatusBadRequest, "bad_field", "field path is required")
	}
	if e := checkRepoID("id", *req.ID); e != nil {
		if pathLike(*req.ID) {
			s.security("repository id names a path", "register "+truncate(*req.ID, 60), "repository ids", "a repository id is a name, not a path", "remote", r.RemoteAddr)
		}
		return e
	}
	path, err := s.checkRepoPath("field path", *req.Path, "repo", *req.ID, "remote", r.RemoteAddr)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rp := &sessions.Repo{ID: *req.ID, Path: path, CreatedAt: time.Now()}
	err = s.repos.CreateRepo(ctx, rp)
	if errors.Is(err, sessions.ErrRepoExists) {
		old, lerr := s.repos.LoadRepo(ctx, rp.ID)
		if lerr != nil {
			return lerr
		}
		if old.Path != path {
			return errorf(http.StatusConflict, "repo_exists", "repository '%s' is registered with another path (%s)", rp.ID, old.Path)
		}
		writeJSON(w, http.StatusOK, toRepoJSON(old))
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("repository registered", "repo", rp.ID, "path", path)
	writeJSON(w, http.StatusCreated, toRepoJSON(rp))
	return nil
}

// deleteRepo handles DELETE /api/repos/{id}: 204; 409 while active
// sessions are bound to it.
func (s *Server) deleteRepo(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rp, err := s.lookupRepo(ctx, "id", r.PathValue("id"))
	if err != nil {
		return err
	}
	_, n, err := s.store.Backend().List(ctx, sessions.ListFilter{RepoID: rp.ID, Statuses: []sessions.Status{sessions.StatusActive}, Limit: 1})
	if err != nil {
		return err
	}
	if n > 0 {
		return errorf(http.StatusConflict, "repo_in_use", "repository '%s' has %d active sessions: end them first", rp.ID, n)
	}
	if err := s.repos.DeleteRepo(ctx, rp.ID); err != nil && !errors.Is(err, sessions.ErrRepoNotFound) {
		return err
	}
	s.log.Info("repository unregistered", "repo", rp.ID, "path", rp.Path)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
