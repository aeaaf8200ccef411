package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workspace"
)

// createRequest is the body of POST /api/sessions.
type createRequest struct {
	Agent    string          `json:"agent"`
	RepoID   string          `json:"repoId"`
	ID       string          `json:"id"`
	Title    string          `json:"title"`
	Metadata json.RawMessage `json:"metadata"`
	Context  json.RawMessage `json:"context"`
}

// createSession handles POST /api/sessions.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	name, err := s.pickAgent(req.Agent)
	if err != nil {
		return err
	}
	meta := map[string]any{}
	if len(req.Metadata) > 0 && string(req.Metadata) != "null" {
		if meta, err = jsonvalue.DecodeObject(req.Metadata); err != nil {
			return errorf(http.StatusBadRequest, "bad_field", "field metadata must be a JSON object: %v", err)
		}
	}
	meta[metaAgent] = name
	if v, ok := meta[metaRepoID]; ok && v != req.RepoID {
		return errorf(http.StatusBadRequest, "bad_field", "field metadata: key repoId is set from field repoId (give the repository there)")
	}
	ctx := r.Context()
	var repo *sessions.Repo
	if req.RepoID != "" {
		if repo, err = s.lookupRepo(ctx, "repoId", req.RepoID); err != nil {
			return err
		}
		p, escaped, err := s.repoWorkspace(repo)
		if escaped {
			s.security("repository outside the workspace root", "bind repo "+repo.ID, "workspace root", errMessage(err), "remote", r.RemoteAddr)
		}
		if err != nil {
			return err
		}
		// Binding and the agent's session (an external agent's cwd) see
		// the repository as the session's workspace.
		ctx = workspace.NewContext(ctx, p)
		meta[metaRepoID] = repo.ID
	}
	started := map[string]any{"agent": name}
	if b, ok := s.cfg.Agents[name].(Binder); ok {
		var sc map[string]any
		if len(req.Context) > 0 && string(req.Context) != "null" {
			if sc, err = jsonvalue.DecodeObject(req.Context); err != nil {
				return errorf(http.StatusBadRequest, "bad_field", "field context must be a JSON object: %v", err)
			}
		}
		if repo != nil {
			// The agent works in the repository: its context's workingDir
			// is the repository, or a directory inside it.
			if sc == nil {
				sc = map[string]any{}
			}
			if _, ok := sc["workingDir"]; !ok {
				sc["workingDir"] = repo.Path
			}
		}
		bound, data, err := b.Bind(ctx, sc)
		if err != nil {
			return errorf(http.StatusBadRequest, "bad_context", "%v", err)
		}
		for k, v := range bound {
			meta[k] = v
		}
		started = data
	} else if len(req.Context) > 0 && string(req.Context) != "null" {
		return errorf(http.StatusBadRequest, "bad_field", "field context: agent '%s' is not an agent file (--agent NAME.agent.yaml) and takes no session context", name)
	}
	info := sessions.Info{Metadata: meta, Started: started}
	if req.Title != "" {
		info.Title = &req.Title
	}
	id := req.ID
	if id == "" {
		id = s.cfg.NewID()
	} else if e := checkID(id); e != nil {
		return e
	}
	n, err := s.createCounted(ctx, id, info)
	if errors.Is(err, sessions.ErrExists) {
		return errorf(http.StatusConflict, "exists", "session '%s' already exists", id)
	}
	if err != nil {
		return err
	}
	if repo != nil {
		// the repository path, for audit (seed 001)
		s.log.Info("session created", "id", id, "agent", name, "active", n, "repo", repo.ID, "path", repo.Path)
	} else {
		s.log.Info("session created", "id", id, "agent", name, "active", n)
	}
	if sa, ok := s.cfg.Agents[name].(SessionAgent); ok {
		if err := sa.Open(ctx, id); err != nil {
			s.AgentFailed(id, err)
			return errorf(http.StatusBadGateway, "agent_failed", "agent '%s' could not start session '%s': %v", name, id, err)
		}
	}
	rec, err := s.store.Meta(ctx, id)
	if err != nil {
		return err
	}
	out := toSessionJSON(summaryOf(rec, 0), false)
	if repo != nil {
		out.Repo = toRepoJSON(repo)
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// pickAgent returns the agent a new session uses: the named one, or the
// only one.
func (s *Server) pickAgent(name string) (string, error) {
	if name == "" {
		if len(s.cfg.Agents) == 1 {
			for n := range s.cfg.Agents {
				return n, nil
			}
		}
		return "", errorf(http.StatusBadRequest, "bad_field", "field agent is required with more than one agent (one of: %s)", strings.Join(s.agentNames(), ", "))
	}
	if _, ok := s.cfg.Agents[name]; !ok {
		return "", errorf(http.StatusNotFound, "unknown_agent", "unknown agent '%s' (one of: %s)", name, strings.Join(s.agentNames(), ", "))
	}
	return name, nil
}

func (s *Server) agentNames() []string {
	names := make([]string, 0, len(s.cfg.Agents))
	for n := range s.cfg.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// createCounted creates session id if fewer than MaxSessions served
// sessions are active, or refuses with 429. It holds the create lock
// while it counts and creates, so that replicas sharing the store never
// exceed the limit together. It returns the active count after.
func (s *Server) createCounted(ctx context.Context, id string, info sessions.Info) (int, error) {
	// The creations of this process queue here, so that only one at a
	// time waits for the create lock.
	s.createMu.Lock()
	defer s.createMu.Unlock()
	lk, err := s.waitLock(ctx, lockCreate, "session creation", "")
	if err != nil {
		return 0, err
	}
	defer s.unlock(lk)
	n, err := s.countActive(ctx)
	if err != nil {
		return 0, err
	}
	if n >= s.cfg.MaxSessions {
		s.log.Info("session refused: limit reached", "active", n, "max", s.cfg.MaxSessions)
		return 0, &apiError{status: http.StatusTooManyRequests, code: "too_many_sessions", retryAfter: 60,
			message: "the server already has " + strconv.Itoa(n) + " active sessions, its limit (--max-sessions " + strconv.Itoa(s.cfg.MaxSessions) +
				"); wait for one to end (completed, cancelled, idle timeout or error), or end one with DELETE /api/sessions/{id}, and retry in 60 seconds"}
	}
	if err := s.store.Create(ctx, id, info); errors.Is(err, sessions.ErrFull) {
		return 0, s.errSessionCap()
	} else if err != nil {
		return 0, err
	}
	s.metrics.sessionsActive.Set(float64(n + 1))
	return n + 1, nil
}

// errSessionCap is the 429 session_cap of a new session refused because
// the store is not durable (--store memory) and already holds
// --session-cap sessions: there, a session pushed out of memory is gone,
// so the store refuses one more (New makes it: RefuseWhenFull) rather
// than silently drop the least recently used. Sessions created inside a
// turn (sub-agents, forks, a script's sessions) are refused the same way:
// the builtin that creates them fails, naming the cap.
func (s *Server) errSessionCap() error {
	limit := s.store.Cap()
	s.log.Info("session refused: memory store full", "cap", limit)
	return &apiError{status: http.StatusTooManyRequests, code: "session_cap",
		message: "the memory store already holds " + strconv.Itoa(limit) + " sessions, its limit (--session-cap " + strconv.Itoa(limit) +
			"), and a session pushed out of it would be lost: serve with a larger --session-cap, or with a durable --store (sqlite:FILE), from which sessions leave memory and come back when used"}
}

// countActive counts the served sessions (those created through the
// API, which have an agent) that are active in the store, whichever
// process created them, and sets the metric.
func (s *Server) countActive(ctx context.Context) (int, error) {
	// Counted by the backend (an index count on the durable stores), one
	// session read: reading every active session made each creation cost
	// what the server holds.
	_, n, err := s.store.Backend().List(ctx, sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}, HasAgent: true, Limit: 1})
	if err != nil {
		return 0, err
	}
	s.metrics.sessionsActive.Set(float64(n))
	return n, nil
}

// listResponse is the body of GET /api/sessions.
type listResponse struct {
	Sessions []sessionJSON `json:"sessions"`
	// Total counts the matches up to listCountLimit; TotalExact is false
	// when the count stopped there (more may match).
	Total      int  `json:"total"`
	TotalExact bool `json:"totalExact"`
	Limit      int  `json:"limit"`
	Offset     int  `json:"offset"`
	// NextCursor, when the page is not the last, is the cursor of the
	// next page.
	NextCursor *string `json:"nextCursor"`
}

// listCountLimit is where GET /api/sessions stops counting the matches:
// a count costs what it counts, so an exact count of every match would
// make the listing grow with the store.
const listCountLimit = 1000

// listSessions handles GET /api/sessions.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, offset, err := pageQuery(r)
	if err != nil {
		return err
	}
	var statuses []sessions.Status
	if v := q.Get("status"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			st := sessions.Status(strings.TrimSpace(st))
			if !st.Valid() {
				return errorf(http.StatusBadRequest, "bad_query", "unknown status '%s' (expected one of: active, cancelled, completed, error)", sessions.Escape(truncate(string(st), 40)))
			}
			statuses = append(statuses, st)
		}
	}
	var where *sessions.Where
	if q.Has("where") {
		if where, err = sessions.CompileWhere(q.Get("where")); err != nil {
			return errorf(http.StatusBadRequest, "bad_where", "where: %v", err)
		}
	}
	f := sessions.ListFilter{Statuses: statuses, ParentID: q.Get("parentId"), RepoID: q.Get("repoId"), Agent: q.Get("agent"),
		Text: q.Get("q"), Limit: limit + 1, Offset: offset, CountLimit: listCountLimit}
	for name, t := range map[string]*time.Time{"createdAfter": &f.CreatedAfter, "createdBefore": &f.CreatedBefore,
		"updatedAfter": &f.UpdatedAfter, "updatedBefore": &f.UpdatedBefore} {
		if *t, err = queryTime(q, name); err != nil {
			return err
		}
	}
	if v := q.Get("cursor"); v != "" {
		if f.After, err = decodeCursor(v); err != nil {
			return err
		}
	}
	// This process's turns are read before the listing (see readSession);
	// the turn locks of other processes only after it, as the listing
	// names the sessions: a turn of another process that ends while the
	// listing is read may show in the next listing only.
	busy := s.busyHere()
	list, total, err := sessions.ListWhere(r.Context(), s.store.Backend(), f, where)
	if err != nil {
		if where != nil {
			return errorf(http.StatusBadRequest, "bad_where", "where: %v", err)
		}
		return err
	}
	out := listResponse{Total: total, TotalExact: total < listCountLimit, Limit: limit, Offset: offset}
	if len(list) > limit { // the extra session read shows there is a next page
		list = list[:limit]
		c := sessions.CursorOf(&list[limit-1]).String()
		out.NextCursor = &c
	}
	out.Sessions = make([]sessionJSON, len(list))
	ids := make([]string, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	running := s.runningAnywhere(r.Context(), ids)
	for i := range list {
		out.Sessions[i] = toSessionJSON(&list[i], running[list[i].ID] || busy[list[i].ID])
		out.Sessions[i].Queued = s.queued(list[i].ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// queryTime returns the time of query parameter name (RFC 3339), the
// zero time when it is not given.
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errorf(http.StatusBadRequest, "bad_query", "query parameter %s must be an RFC 3339 time such as 2026-11-27T09:30:00Z, got %q", name, truncate(v, 40))
	}
	return t, nil
}

// decodeCursor reads a cursor of nextCursor (sessions.ParseCursor).
func decodeCursor(v string) (*sessions.ListCursor, error) {
	c, err := sessions.ParseCursor(v)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "bad_query", "query parameter cursor %q is not a cursor this server returned (nextCursor)", truncate(v, 40))
	}
	return c, nil
}

// getSession handles GET /api/sessions/{id}: the session with all its
// messages.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rec, out, err := s.readSession(r.Context(), id)
	if err != nil {
		return err
	}
	if out.Repo, err = s.repoOf(r.Context(), rec); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionWithMessages{out, toMessagesJSON(rec)})
	return nil
}

// repoOf returns the repository session rec is bound to, as JSON: nil
// when it has none, or when it is no longer registered.
func (s *Server) repoOf(ctx context.Context, rec *sessions.Record) (*repoJSON, error) {
	id := strOf(rec.Metadata, metaRepoID)
	if id == "" {
		return nil, nil
	}
	r, err := s.repos.LoadRepo(ctx, id)
	if errors.Is(err, sessions.ErrRepoNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toRepoJSON(r), nil
}

// snapshot returns the session's full state, or a 404. Like meta, it
// reads what the store holds, whichever process wrote it.
func (s *Server) snapshot(ctx context.Context, id string) (*sessions.Record, error) {
	if err := s.store.Refresh(ctx, id); err != nil {
		return nil, err
	}
	rec, err := s.store.Snapshot(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, errNotFound(id)
	}
	return rec, err
}

// meta returns the session's state without messages, or a 404. It
// first drops the store's live copy of the session if another process
// wrote the session since.
func (s *Server) meta(ctx context.Context, id string) (*sessions.Record, error) {
	if err := s.store.Refresh(ctx, id); err != nil {
		return nil, err
	}
	return s.cachedMeta(ctx, id)
}

// cachedMeta is meta without the refresh: the store's live copy of the
// session when it has one, which another process may have changed.
func (s *Server) cachedMeta(ctx context.Context, id string) (*sessions.Record, error) {
	rec, err := s.store.Meta(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, errNotFound(id)
	}
	return rec, err
}

// deleteSession handles DELETE /api/sessions/{id}: it cancels the
// running turn, if any, and marks the session cancelled; with
// ?purge=true it deletes the session and its history instead.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	purge := false
	switch v := r.URL.Query().Get("purge"); v {
	case "", "false":
	case "true":
		purge = true
	default:
		return errorf(http.StatusBadRequest, "bad_query", "query parameter purge must be true or false, got %q", truncate(v, 40))
	}
	ctx := r.Context()
	if _, err := s.meta(ctx, id); err != nil {
		return err
	}
	dropped := s.dropQueued(id, "the session was deleted")
	// The turn lock stops the running turn, wherever it runs, and keeps
	// new turns and the idle reaper away while the session ends.
	lk, err := s.waitLock(ctx, turnLock(id), "session '"+id+"'", reasonDelete)
	if err != nil {
		return err
	}
	defer s.unlock(lk)
	rec, err := s.meta(ctx, id)
	if err != nil {
		return err
	}
	if purge {
		err := s.store.Delete(ctx, id)
		switch {
		case errors.Is(err, sessions.ErrNotFound):
			return errNotFound(id)
		case errors.Is(err, sessions.ErrHasChildren):
			return errorf(http.StatusConflict, "has_forks", "session '%s' has forks; delete them first", id)
		case err != nil:
			return err
		}
		s.closeAgent(rec.Metadata, id)
		s.ended(ctx, id, "purged")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	// A turn this delete stopped may have set the status first (an agent
	// loop marks its session cancelled when it is cancelled): the
	// cancellation is recorded all the same, once.
	switch {
	case rec.Status == sessions.StatusActive, rec.Status == sessions.StatusCancelled && strOf(rec.Metadata, metaReason) != reasonCancelled:
		if err := s.end(ctx, id, sessions.StatusCancelled, reasonCancelled, "Session cancelled by request."+droppedNote(dropped)); err != nil {
			return err
		}
	case rec.Status != sessions.StatusCancelled:
		return errorf(http.StatusConflict, "not_active", "session '%s' is %s, not active", id, rec.Status)
	}
	rec, err = s.snapshot(ctx, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSessionJSON(summaryOf(rec, len(rec.Messages)), false))
	return nil
}

// reasonCancelled is metadata.reason of a session cancelled by DELETE.
const reasonCancelled = "cancelled"

// droppedNote is what a session's closing system message adds about the
// queued prompts that were dropped.
func droppedNote(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " 1 queued prompt was not run."
	}
	return " " + strconv.Itoa(n) + " queued prompts were not run."
}

// errDeleted is the cancellation cause of a turn whose session was
// deleted or cancelled.
var errDeleted = errors.New("the session was cancelled")

// end moves an active session to a final status: it heals open tool
// calls, appends a system message saying why (note), records reason in
// a status event, and stops counting the session as active. The caller
// holds the session's turn lock.
func (s *Server) end(ctx context.Context, id string, status sessions.Status, reason, note string) error {
	if err := s.store.Heal(ctx, id, string(status)); err != nil {
		return err
	}
	rec, err := s.store.Meta(ctx, id)
	if err != nil {
		return err
	}
	previous := rec.Status
	if previous == status {
		previous = sessions.StatusActive // the stopped turn's loop set the status first
	}
	ch := &sessions.Change{Status: status, SetMetadata: true, Metadata: sessions.MergeMetadata(rec.Metadata, map[string]any{metaReason: reason}),
		Events: []sessions.Event{sessions.NewEvent(sessions.EventStatus,
			map[string]any{"status": string(status), "previous": string(previous), metaReason: reason})}}
	if note != "" {
		ch.Append = []message.Message{{Role: message.RoleSystem, Text: note, Metadata: map[string]any{metaReason: reason}}}
	}
	if _, err := s.store.Apply(ctx, id, ch); err != nil {
		return err
	}
	s.closeAgent(rec.Metadata, id)
	s.ended(ctx, id, reason)
	return nil
}

// closeAgent tells a SessionAgent that session id (whose metadata is
// meta) has ended.
func (s *Server) closeAgent(meta map[string]any, id string) {
	if sa, ok := s.cfg.Agents[strOf(meta, metaAgent)].(SessionAgent); ok {
		sa.Close(id)
	}
}

// AgentFailed records a failure of session id's agent outside a turn
// (an external agent's process died between prompts): the session
// becomes "error", with a system message saying why. While a turn of
// the session runs, that turn fails with the same cause and records it,
// so nothing is done here.
func (s *Server) AgentFailed(id string, cause error) {
	ctx := context.Background()
	lk, err := s.locks.TryLock(ctx, turnLock(id))
	if err != nil {
		return // a turn runs (or the store is unreachable: the next request sees it)
	}
	defer s.unlock(lk)
	rec, err := s.store.Meta(ctx, id)
	if err != nil || rec.Status != sessions.StatusActive {
		return
	}
	if err := s.end(ctx, id, sessions.StatusError, "error", "The agent failed: "+cause.Error()); err != nil {
		s.log.Error("recording an agent's failure failed", "id", id, "err", err)
	}
}

// ended logs a session's leaving the active ones, with the active
// count after.
func (s *Server) ended(ctx context.Context, id, reason string) {
	n, err := s.countActive(ctx)
	if err != nil {
		s.log.Info("session ended", "id", id, "reason", reason)
		return
	}
	s.log.Info("session ended", "id", id, "reason", reason, "active", n)
}

// agentInfo is one entry of GET /api/agents.
type agentInfo struct {
	Name string `json:"name"`
}

// listAgents handles GET /api/agents (the viewer's agent filter).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	out := []agentInfo{}
	for _, n := range s.agentNames() {
		out = append(out, agentInfo{Name: n})
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// reasonCompleted is metadata.reason of a session completed by POST
// .../complete.
const reasonCompleted = "completed_by_user"

// completeSession handles POST /api/sessions/{id}/complete: the graceful
// end of seed 001. A running turn is let finish (the request waits for
// it, up to the lock wait, else 503), queued prompts are dropped, and the
// session becomes completed with metadata.reason "completed_by_user"
// and a system message. Completing a completed session answers it as it
// is; a cancelled session, or one in error, is 409.
func (s *Server) completeSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := decodeBody(r, &struct{}{}, true); err != nil {
		return err
	}
	ctx := r.Context()
	rec, err := s.meta(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status == sessions.StatusCompleted {
		return s.writeSession(w, r, id, http.StatusOK)
	}
	if rec.Status != sessions.StatusActive {
		return errorf(http.StatusConflict, "not_active", "session '%s' is %s, not active", id, rec.Status)
	}
	dropped := s.dropQueued(id, "the session was completed")
	lk, err := s.waitLock(ctx, turnLock(id), "session '"+id+"'", "")
	if err != nil {
		return err
	}
	defer s.unlock(lk)
	if rec, err = s.meta(ctx, id); err != nil {
		return err
	}
	switch rec.Status {
	case sessions.StatusActive:
		if err := s.end(ctx, id, sessions.StatusCompleted, reasonCompleted, "Session completed by request."+droppedNote(dropped)); err != nil {
			return err
		}
	case sessions.StatusCompleted:
	default:
		return errorf(http.StatusConflict, "not_active", "session '%s' is %s, not active", id, rec.Status)
	}
	if rec, err = s.snapshot(ctx, id); err != nil {
		return err
	}
	// This request holds the turn lock: no turn runs.
	writeJSON(w, http.StatusOK, toSessionJSON(summaryOf(rec, len(rec.Messages)), false))
	return nil
}

// writeSession answers with session id's object (without its messages).
func (s *Server) writeSession(w http.ResponseWriter, r *http.Request, id string, status int) error {
	_, out, err := s.readSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, status, out)
	return nil
}

// readSession reads session id and its object (running, queued) for a
// response. Whether a turn runs is read before the session, so that a
// session reads "running": false only with every turn that had ended by
// then in its messages. Read the other way round, a turn could start and
// end between the two reads (the next queued prompt, or a turn in another
// process) and the session would read idle without that turn, so that a
// client polling for the end of its prompts stops with a reply missing.
// A turn of this process that starts between the two reads and still
// runs after them is reported too (its prompt may be in the messages).
func (s *Server) readSession(ctx context.Context, id string) (*sessions.Record, sessionJSON, error) {
	before := s.runningAnywhere(ctx, []string{id})[id]
	rec, err := s.snapshot(ctx, id)
	if err != nil {
		return nil, sessionJSON{}, err
	}
	out := toSessionJSON(summaryOf(rec, len(rec.Messages)), before || s.runningHere(id))
	out.Queued = s.queued(id)
	return rec, out, nil
}
