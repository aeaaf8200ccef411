package serve

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: the document served at /openapi.json lists
// exactly the routes the server serves, with their methods.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := newTestServer(t, Config{})
	r := ts.doAuth("GET", "/openapi.json", nil, "")
	ts.expect(r, http.StatusOK, "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			var o map[string]any
			if err := json.Unmarshal(op, &o); err != nil {
				t.Fatal(err)
			}
			if _, ok := o["responses"]; !ok {
				t.Errorf("%s %s has no responses", method, path)
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range ts.srv.routeTable() {
		path := strings.TrimSuffix(rt.path, "{$}")
		if path == "" {
			path = "/"
		}
		served[rt.method+" "+path] = true
		if !documented[rt.method+" "+path] {
			t.Errorf("route %s %s is not in openapi.json", rt.method, path)
		}
		// Path parameters are declared.
		for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
			if !strings.Contains(string(r.body), `"name": "`+m[1]+`"`) {
				t.Errorf("parameter %s of %s is not declared", m[1], path)
			}
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("openapi.json documents %s, which is not served", k)
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range served {
			if !yield(k) {
				return
			}
		}
	})
	if len(keys) < 14 {
		t.Fatalf("routes: %v", keys)
	}
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hi"}), http.StatusAccepted, "")
	ts.waitIdle(id)
	ts.do("GET", "/api/sessions/nope", nil)
	r := ts.do("GET", "/metrics", nil)
	ts.expect(r, http.StatusOK, "")
	body := string(r.body)
	for _, want := range []string{
		`skein_http_requests_total{code="201",route="POST /api/sessions"} 1`,
		`skein_http_requests_total{code="202",route="POST /api/sessions/{id}/prompt"} 1`,
		`skein_http_requests_total{code="404",route="GET /api/sessions/{id}"} 1`,
		`skein_turns_running 0`,
		`skein_turns_total{outcome="done"} 1`,
		`skein_turn_duration_seconds_count 1`,
		`skein_sse_clients 0`,
		`skein_store_errors_total 0`,
		`skein_sessions_active 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, testToken) {
		t.Fatal("metrics show the token")
	}
	h := ts.doAuth("GET", "/healthz", nil, "")
	ts.expect(h, http.StatusOK, "")
	if h.json()["status"] != "ok" {
		t.Fatalf("healthz: %s", h.body)
	}
}
