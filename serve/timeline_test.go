package serve

import (
	"net/http"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// TestTimelineRunsLineage checks the viewer's API without a browser: a
// session's timeline and totals, why a session ended, children by
// parentId, and the workflow runs with their steps and graph.
func TestTimelineRunsLineage(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	ts := newTestServer(t, Config{Store: store})
	runID := viewerFixture(t, store)

	tl := ts.do("GET", "/api/sessions/planner/timeline", nil)
	ts.expect(tl, http.StatusOK, "")
	m := tl.json()
	tot := m["totals"].(map[string]any)
	for k, want := range map[string]float64{"turns": 2, "modelCalls": 2, "toolCalls": 1, "toolErrors": 0, "inputTokens": 1622, "outputTokens": 58, "modelMs": 2050, "toolMs": 35} {
		if tot[k] != want {
			t.Errorf("totals.%s = %v, want %v", k, tot[k], want)
		}
	}
	if c := tot["costUsd"].(float64); c < 0.00299 || c > 0.00301 || tot["costKnown"] != true {
		t.Errorf("cost %v, known %v", c, tot["costKnown"])
	}
	turns := m["turns"].([]any)
	if len(turns) != 2 {
		t.Fatalf("%d turns: %v", len(turns), turns)
	}
	first := turns[0].(map[string]any)
	items := first["items"].([]any)
	if first["iteration"] != 1.0 || first["system"] != "You plan trips.\nBe brief." || first["estimatedTokens"] != 412.0 || len(items) != 2 {
		t.Errorf("turn 1: %v", first)
	}
	if model, tool := items[0].(map[string]any), items[1].(map[string]any); model["kind"] != "model" || model["durationMs"] != 840.0 || model["inputTokens"] != 120.0 ||
		tool["kind"] != "tool" || tool["name"] != "weather" || tool["durationMs"] != 35.0 || tool["callId"] != "c1" {
		t.Errorf("turn 1 items: %v", items)
	}
	if _, ok := m["ended"]; ok {
		t.Errorf("an active session whose loops ended normally has ended: %v", m["ended"])
	}
	broken := ts.do("GET", "/api/sessions/broken/timeline", nil).json()
	if e := broken["ended"].(map[string]any); e["status"] != "error" || e["reason"] != "openai: auth: incorrect API key provided" {
		t.Errorf("ended: %v", e)
	}

	kids := ts.do("GET", "/api/sessions?parentId=planner", nil).json()
	if kids["total"] != 1.0 || kids["sessions"].([]any)[0].(map[string]any)["id"] != "planner-fork" {
		t.Errorf("children: %v", kids)
	}
	if p := ts.do("GET", "/api/sessions/planner", nil).json(); p["childCount"] != 1.0 {
		t.Errorf("childCount %v", p["childCount"])
	}

	runs := ts.do("GET", "/api/runs", nil).json()
	if runs["total"] != 1.0 {
		t.Fatalf("runs: %v", runs)
	}
	ts.expect(ts.do("GET", "/api/runs?status=bogus", nil), http.StatusBadRequest, "bad_query")
	ts.expect(ts.do("GET", "/api/runs/nope", nil), http.StatusNotFound, "not_found")
	run := ts.do("GET", "/api/runs/"+runID, nil).json()
	steps := run["stepList"].([]any)
	graph := run["graph"].(map[string]any)
	if run["status"] != "completed" || len(steps) != 2 || steps[1].(map[string]any)["sessionId"] != runID+"/write" {
		t.Errorf("run: %v", run)
	}
	if edges := graph["edges"].([]any); len(graph["nodes"].([]any)) != 2 || len(edges) != 1 || edges[0].(map[string]any)["from"] != "research" {
		t.Errorf("graph: %v", graph)
	}
	// a stage's session is readable through %2F
	ts.expect(ts.do("GET", "/api/sessions/"+runID+"%2Fwrite", nil), http.StatusOK, "")
}
