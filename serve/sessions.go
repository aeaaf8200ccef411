package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
)

// createRequest is the body of POST /api/sessions.
type createRequest struct {
	Agent    string          `json:"agent"`
	RepoID   string          `json:"repoId"`
	ID       string          `json:"id"`
	Title    string          `json:"title"`
	Metadata json.RawMessage `json:"metadata"`
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
	if req.RepoID != "" {
		meta[metaRepoID] = req.RepoID
	}
	info := sessions.Info{Metadata: meta}
	if req.Title != "" {
		info.Title = &req.Title
	}
	id := req.ID
	if id == "" {
		id = s.cfg.NewID()
	} else if e := checkID(id); e != nil {
		return e
	}
	if err := s.reserveSession(); err != nil {
		return err
	}
	err = s.store.Create(r.Context(), id, info)
	s.mu.Lock()
	s.creating--
	if err == nil {
		s.active[id] = true
	}
	s.metrics.sessionsActive.Set(float64(len(s.active)))
	s.mu.Unlock()
	if errors.Is(err, sessions.ErrExists) {
		return errorf(http.StatusConflict, "exists", "session '%s' already exists", id)
	}
	if err != nil {
		return err
	}
	s.log.Info("session created", "id", id, "agent", name, "active", s.activeCount())
	rec, err := s.store.Meta(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toSessionJSON(summaryOf(rec, 0), false))
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

// reserveSession counts a session being created against MaxSessions, or
// refuses with 429.
func (s *Server) reserveSession() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.active) + s.creating; n >= s.cfg.MaxSessions {
		s.log.Info("session refused: limit reached", "active", n, "max", s.cfg.MaxSessions)
		return &apiError{status: http.StatusTooManyRequests, code: "too_many_sessions", retryAfter: 60,
			message: "the server already has " + strconv.Itoa(n) + " active sessions, its limit (--max-sessions " + strconv.Itoa(s.cfg.MaxSessions) +
				"); wait for one to end (completed, cancelled, idle timeout or error), or end one with DELETE /api/sessions/{id}, and retry in 60 seconds"}
	}
	s.creating++
	return nil
}

func (s *Server) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// listResponse is the body of GET /api/sessions.
type listResponse struct {
	Sessions []sessionJSON `json:"sessions"`
	Total    int           `json:"total"`
	Limit    int           `json:"limit"`
	Offset   int           `json:"offset"`
}

// listSessions handles GET /api/sessions.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	var statuses []sessions.Status
	if v := q.Get("status"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			st := sessions.Status(strings.TrimSpace(st))
			if !st.Valid() {
				return errorf(http.StatusBadRequest, "bad_query", "unknown status %q (expected one of: active, cancelled, completed, error)", truncate(string(st), 40))
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
	match := sessionFilter(q.Get("repoId"), q.Get("agent"), q.Get("q"))
	f := sessions.ListFilter{Statuses: statuses, Limit: limit, Offset: offset}
	if match != nil {
		f.Limit, f.Offset = 0, 0
	}
	list, total, err := sessions.ListWhere(r.Context(), s.store.Backend(), f, where)
	if err != nil {
		if where != nil {
			return errorf(http.StatusBadRequest, "bad_where", "where: %v", err)
		}
		return err
	}
	if match != nil {
		kept := list[:0]
		for _, sum := range list {
			if match(&sum) {
				kept = append(kept, sum)
			}
		}
		f.Limit, f.Offset = limit, offset
		list, total = f.Page(kept), len(kept)
	}
	out := listResponse{Sessions: make([]sessionJSON, len(list)), Total: total, Limit: limit, Offset: offset}
	for i := range list {
		out.Sessions[i] = toSessionJSON(&list[i], s.isRunning(list[i].ID))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sessionFilter returns the predicate of the list filters on metadata
// and text, or nil when none is given.
func sessionFilter(repoID, agentName, text string) func(*sessions.Summary) bool {
	if repoID == "" && agentName == "" && text == "" {
		return nil
	}
	text = strings.ToLower(text)
	return func(sum *sessions.Summary) bool {
		switch {
		case repoID != "" && strOf(sum.Metadata, metaRepoID) != repoID:
			return false
		case agentName != "" && strOf(sum.Metadata, metaAgent) != agentName:
			return false
		case text != "" && !strings.Contains(strings.ToLower(sum.ID+"\n"+sum.Label()), text):
			return false
		}
		return true
	}
}

// getSession handles GET /api/sessions/{id}: the session with all its
// messages.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rec, err := s.snapshot(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionWithMessages{toSessionJSON(summaryOf(rec, len(rec.Messages)), s.isRunning(id)), toMessagesJSON(rec)})
	return nil
}

// snapshot returns the session's full state, or a 404.
func (s *Server) snapshot(ctx context.Context, id string) (*sessions.Record, error) {
	rec, err := s.store.Snapshot(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, errNotFound(id)
	}
	return rec, err
}

// meta returns the session's state without messages, or a 404.
func (s *Server) meta(ctx context.Context, id string) (*sessions.Record, error) {
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
	rec, err := s.meta(ctx, id)
	if err != nil {
		return err
	}
	s.stopTurn(id, errDeleted, true)
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
		s.deactivate(id, "purged")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if rec.Status == sessions.StatusActive {
		if err := s.end(ctx, id, sessions.StatusCancelled, "cancelled", "Session cancelled by request."); err != nil {
			return err
		}
	} else if rec.Status != sessions.StatusCancelled {
		return errorf(http.StatusConflict, "not_active", "session '%s' is %s, not active", id, rec.Status)
	}
	rec, err = s.snapshot(ctx, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSessionJSON(summaryOf(rec, len(rec.Messages)), false))
	return nil
}

// errDeleted is the cancellation cause of a turn whose session was
// deleted or cancelled.
var errDeleted = errors.New("the session was cancelled")

// end moves an active session to a final status: it heals open tool
// calls, appends a system message saying why (note), records reason in
// a status event, and stops counting the session as active.
func (s *Server) end(ctx context.Context, id string, status sessions.Status, reason, note string) error {
	if err := s.store.Heal(ctx, id, string(status)); err != nil {
		return err
	}
	rec, err := s.store.Meta(ctx, id)
	if err != nil {
		return err
	}
	ch := &sessions.Change{Status: status, SetMetadata: true, Metadata: sessions.MergeMetadata(rec.Metadata, map[string]any{metaReason: reason}),
		Events: []sessions.Event{sessions.NewEvent(sessions.EventStatus,
			map[string]any{"status": string(status), "previous": string(rec.Status), metaReason: reason})}}
	if note != "" {
		ch.Append = []sessions.Message{{Role: sessions.RoleSystem, Text: note, Metadata: map[string]any{metaReason: reason}}}
	}
	if _, err := s.store.Apply(ctx, id, ch); err != nil {
		return err
	}
	s.deactivate(id, reason)
	return nil
}

// deactivate stops counting a session as active.
func (s *Server) deactivate(id, reason string) {
	s.mu.Lock()
	_, was := s.active[id]
	delete(s.active, id)
	n := len(s.active)
	s.metrics.sessionsActive.Set(float64(n))
	s.mu.Unlock()
	if was {
		s.log.Info("session ended", "id", id, "reason", reason, "active", n)
	}
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
