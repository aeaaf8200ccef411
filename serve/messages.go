package serve

import (
	"net/http"
	"strconv"
	"time"
)

// listMessages handles GET /api/sessions/{id}/messages: the messages
// created after ?since= (RFC 3339), or with a seq after ?afterSeq=, or
// all of them.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return errorf(http.StatusBadRequest, "bad_query", "query parameter since must be an RFC 3339 time such as 2026-01-02T03:04:05Z, got %q", truncate(v, 40))
		}
	}
	afterSeq := int64(-1)
	if v := q.Get("afterSeq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, "bad_query", "query parameter afterSeq must be an integer >= 0, got %q", truncate(v, 40))
		}
		afterSeq = n
	}
	if !since.IsZero() && afterSeq >= 0 {
		return errorf(http.StatusBadRequest, "bad_query", "use since or afterSeq, not both")
	}
	rec, err := s.snapshot(r.Context(), id)
	if err != nil {
		return err
	}
	all, st := toMessagesJSON(rec), stamps(rec)
	out := make([]messageJSON, 0, len(all))
	for i, m := range all {
		switch {
		case afterSeq >= 0 && m.Seq <= afterSeq:
			continue
		case !since.IsZero() && !createdAt(&rec.Messages[i], st[i]).After(since):
			continue
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
	return nil
}
