package serve

import (
	"net/http"
	"strings"
	"testing"
)

// TestBadRequests: malformed and hostile requests get a clean 4xx with a
// JSON error, never a 500.
func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, Config{MaxBodyBytes: 4096})
	id := ts.create(map[string]any{"id": "s1"})
	big := `{"text": "` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"malformed JSON", "POST", "/api/sessions", `{"repoId": `, 400, "bad_json"},
		{"not an object", "POST", "/api/sessions", `[1, 2]`, 400, "bad_json"},
		{"trailing data", "POST", "/api/sessions", `{} {}`, 400, "bad_json"},
		{"unknown field", "POST", "/api/sessions", `{"repo": "x"}`, 400, "unknown_field"},
		{"wrong field type", "POST", "/api/sessions", `{"repoId": 7}`, 400, "bad_field"},
		{"metadata not an object", "POST", "/api/sessions", `{"metadata": [1]}`, 400, "bad_field"},
		{"bad id in body", "POST", "/api/sessions", `{"id": "../etc"}`, 400, "bad_id"},
		{"oversized body", "POST", "/api/sessions/" + id + "/prompt", big, 413, "body_too_large"},
		{"empty prompt body", "POST", "/api/sessions/" + id + "/prompt", ``, 400, "bad_json"},
		{"prompt without text", "POST", "/api/sessions/" + id + "/prompt", `{}`, 400, "bad_field"},
		{"empty prompt text", "POST", "/api/sessions/" + id + "/prompt", `{"text": ""}`, 400, "bad_field"},
		{"prompt text not a string", "POST", "/api/sessions/" + id + "/prompt", `{"text": {"a": 1}}`, 400, "bad_field"},
		{"prompt unknown field", "POST", "/api/sessions/" + id + "/prompt", `{"text": "a", "x": 1}`, 400, "unknown_field"},
		{"field of another case", "POST", "/api/sessions", `{"TITLE": "x"}`, 400, "unknown_field"},
		{"prompt field of another case", "POST", "/api/sessions/" + id + "/prompt", `{"Text": "a"}`, 400, "unknown_field"},
		{"complete with a field", "POST", "/api/sessions/" + id + "/complete", `{"reason": "x"}`, 400, "unknown_field"},
		{"wrong method", "PUT", "/api/sessions/" + id, nil, 405, "method_not_allowed"},
		{"wrong method on list", "DELETE", "/api/sessions", nil, 405, "method_not_allowed"},
		{"GET prompt", "GET", "/api/sessions/" + id + "/prompt", nil, 405, "method_not_allowed"},
		{"unknown endpoint", "GET", "/api/nothing", nil, 404, "not_found"},
		{"encoded traversal", "GET", "/api/sessions/..%2F..%2Fetc%2Fpasswd", nil, 400, "bad_id"},
		{"encoded dot-dot", "GET", "/api/sessions/%2e%2e", nil, 400, "bad_id"},
		// a workflow stage's session "RUN/NODE" is readable; no other slash is
		{"stage session id", "GET", "/api/sessions/run%2Fnode/messages", nil, 404, "not_found"},
		{"two slashes in id", "GET", "/api/sessions/a%2Fb%2Fc/messages", nil, 400, "bad_id"},
		{"empty part in id", "GET", "/api/sessions/a%2F/messages", nil, 400, "bad_id"},
		{"dot part in id", "GET", "/api/sessions/a%2F../messages", nil, 400, "bad_id"},
		{"control character in id", "GET", "/api/sessions/a%00b", nil, 400, "bad_id"},
		{"too long id", "GET", "/api/sessions/" + strings.Repeat("a", 200), nil, 400, "bad_id"},
		{"huge limit", "GET", "/api/sessions?limit=99999999999999999999", nil, 400, "bad_query"},
		{"limit over the maximum", "GET", "/api/sessions?limit=1001", nil, 400, "bad_query"},
		{"zero limit", "GET", "/api/sessions?limit=0", nil, 400, "bad_query"},
		{"negative offset", "GET", "/api/sessions?offset=-1", nil, 400, "bad_query"},
		{"text offset", "GET", "/api/sessions?offset=abc", nil, 400, "bad_query"},
		{"unknown status", "GET", "/api/sessions?status=active,bogus", nil, 400, "bad_query"},
		{"bad since", "GET", "/api/sessions/" + id + "/messages?since=yesterday", nil, 400, "bad_query"},
		{"negative afterSeq", "GET", "/api/sessions/" + id + "/messages?afterSeq=-3", nil, 400, "bad_query"},
		{"since and afterSeq", "GET", "/api/sessions/" + id + "/messages?afterSeq=1&since=2026-01-01T00:00:00Z", nil, 400, "bad_query"},
		{"bad purge", "DELETE", "/api/sessions/" + id + "?purge=yes", nil, 400, "bad_query"},
		{"bad Last-Event-ID", "GET", "/api/sessions/" + id + "/events?lastEventId=x", nil, 400, "bad_query"},
		{"unknown session events", "GET", "/api/sessions/nope/events", nil, 404, "not_found"},
		{"unknown session cancel", "POST", "/api/sessions/nope/cancel", nil, 404, "not_found"},
		{"unknown session delete", "DELETE", "/api/sessions/nope", nil, 404, "not_found"},
		{"unknown asset", "GET", "/assets/nope.js", nil, 404, "not_found"},
		{"viewer bad id", "GET", "/sessions/a%2F..", nil, 400, "bad_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do(c.method, c.path, c.body)
			if r.status != c.status || r.code() != c.code {
				t.Fatalf("%s %s: %d %s, want %d %s", c.method, c.path, r.status, r.body, c.status, c.code)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	// Nothing above changed the session.
	if g := ts.do("GET", "/api/sessions/"+id, nil).json(); g["messageCount"].(float64) != 0 || g["status"] != "active" {
		t.Fatalf("session changed: %v", g)
	}
	// A header over the limit is refused by net/http itself (431).
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-Big", strings.Repeat("x", 2<<20))
	if resp, err := ts.http.Client().Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("huge header: %d", resp.StatusCode)
		}
	}
}
