package serve

import (
	"net/http"
	"testing"
)

// TestBlankPrompt: a prompt of white space only (no model takes it) is a
// 400 and leaves the session as it was; before the fix it was accepted,
// failed the turn (a 500 with a real agent) and left the session in
// error for good.
func TestBlankPrompt(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	for _, text := range []string{"   ", "\n\t", "\u00a0", "\u3000", " \r\n\u2003 "} {
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": text}), http.StatusBadRequest, "bad_field")
	}
	ts.waitIdle(id)
	r := ts.do("GET", "/api/sessions/"+id, nil)
	ts.expect(r, http.StatusOK, "")
	if st := r.json()["status"]; st != "active" || len(r.json()["messages"].([]any)) != 0 {
		t.Fatalf("after blank prompts: %s", r.body)
	}
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hello"}), http.StatusAccepted, "")
	ts.waitIdle(id)
}

// TestHugeNumber: a number out of float64's range in a request body is a
// 400 (it was a 500).
func TestHugeNumber(t *testing.T) {
	ts := newTestServer(t, Config{})
	for _, body := range []string{`{"metadata": {"a": 1e999999}}`, `{"metadata": {"a": -1e400}}`, `{"title": "t", "metadata": {"a": [1e999999]}}`} {
		r := ts.do("POST", "/api/sessions", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	id := ts.create(nil)
	if r := ts.do("PATCH", "/api/sessions/"+id, `{"metadata": {"a": 1e999999}}`); r.status != http.StatusBadRequest && r.status != http.StatusMethodNotAllowed {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
}
