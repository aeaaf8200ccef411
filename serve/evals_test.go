package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/eval/evalfile"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// evalSource is the eval the tests store: four capitals under two
// variants, each case asking the mock model on its own session; with
// BROKEN the task gets two answers wrong, and case "atlantis" always
// fails.
const evalSource = `
DATASET = [
    {"id": "fr", "country": "France", "expected": "Paris"},
    {"id": "jp", "country": "Japan", "expected": "Tokyo"},
    {"id": "pe", "country": "Peru", "expected": "Lima"},
    {"id": "atlantis", "country": "Atlantis", "expected": "?"},
]
VARIANTS = [{"name": "terse", "temperature": 0}, {"name": "chatty", "temperature": 0.7}]

def task(case):
    if case["id"] == "atlantis":
        fail("no such country: Atlantis")
    llm_call("The capital of " + case["country"] + "?")
    if BROKEN and case["id"] in ("jp", "pe"):
        return {"capital": "Osaka"}
    return {"capital": case["expected"]}

score_exact = exact(field = "capital")

def score_short(case, result):
    return {"score": 1.0 if len(result["capital"]) <= 5 else 0.5, "reason": "the answer has %d letters" % len(result["capital"])}
`

// evalFixture runs evalSource twice with the mock model, the second run
// broken and compared with the first, and stores both runs (and their
// cases' sessions) in store. It returns the runs' ids, the baseline
// first.
func evalFixture(t *testing.T, store *sessions.Store) (string, string) {
	t.Helper()
	ctx := context.Background()
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard, Store: store}, 1)
	if err != nil {
		t.Fatal(err)
	}
	st.Begin(ctx)
	var prev *eval.Record
	for i, broken := range []string{"False", "True"} {
		id := []string{"evbase", "evbroken"}[i]
		globals, err := st.ExecFile("capitals_eval.star", "BROKEN = "+broken+"\n"+evalSource)
		if err != nil {
			t.Fatal(vm.FormatError(err))
		}
		s, err := evalfile.NewStarlarkSuite(evalfile.StarlarkConfig{State: st, Globals: globals, RunID: id, CheckOptions: builtins.CheckCallDefaults})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := eval.Run(ctx, s, eval.Options{ID: id, Name: "/evals/capitals_eval.star", File: "capitals_eval.star", Parallel: 2})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			rec.Comparison = eval.Compare(rec, prev)
		}
		if err := eval.Save(ctx, st.Store, rec); err != nil {
			t.Fatal(err)
		}
		prev = rec
	}
	return "evbase", "evbroken"
}

// TestEvalsAPI: GET /api/evals lists the stored eval runs (not the
// workflow runs), newest first, with their totals; GET /api/evals/{id}
// gives the matrix with the deltas against the baseline and every case's
// result with its session, which the session API serves.
func TestEvalsAPI(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	base, broken := evalFixture(t, store)
	if err := store.CreateRun(context.Background(), &sessions.RunRecord{ID: "wfrun", Workflow: "trip", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store})

	var list evalListJSON
	r := ts.do("GET", "/api/evals", nil)
	ts.expect(r, http.StatusOK, "")
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Total != 2 || len(list.Evals) != 2 || list.Evals[0].ID != broken || list.Evals[1].ID != base {
		t.Fatalf("list %+v", list)
	}
	b, n := list.Evals[0], list.Evals[1]
	// 4 cases × 2 variants × 1 repeat, 2 scorers: 16 scores; the base run
	// passes 12 (atlantis fails both scorers under both variants); the
	// broken run loses jp and pe's exact scores: 8 of 16.
	if n.Runs != 8 || n.Cases != 4 || n.Repeat != 1 || n.Errors != 2 || n.PassRate != 0.75 || n.Baseline != "" || n.Regressions != 0 ||
		len(n.Variants) != 2 || n.Variants[0] != "terse" || len(n.Scorers) != 2 || n.Name != "/evals/capitals_eval.star" {
		t.Errorf("base summary %+v", n)
	}
	if b.PassRate != 0.5 || b.Baseline != base || b.Regressions != 2 || !b.CostKnown {
		t.Errorf("broken summary %+v", b)
	}
	r = ts.do("GET", "/api/evals?limit=1&offset=1", nil)
	ts.expect(r, http.StatusOK, "")
	if got := r.json(); got["total"] != 2.0 || len(got["evals"].([]any)) != 1 || got["evals"].([]any)[0].(map[string]any)["id"] != base {
		t.Errorf("page 2: %s", r.body)
	}
	r = ts.do("GET", "/api/evals?name=/elsewhere.star", nil)
	ts.expect(r, http.StatusOK, "")
	if got := r.json(); got["total"] != 0.0 || len(got["evals"].([]any)) != 0 {
		t.Errorf("another eval's runs: %s", r.body)
	}
	ts.expect(ts.do("GET", "/api/evals?limit=0", nil), http.StatusBadRequest, "bad_query")

	var ev evalJSON
	r = ts.do("GET", "/api/evals/"+broken, nil)
	ts.expect(r, http.StatusOK, "")
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Matrix) != 4 || len(ev.Results) != 8 || len(ev.VariantList) != 2 || ev.VariantList[1].Options["temperature"] != 0.7 {
		t.Fatalf("eval %s", r.body)
	}
	cell := ev.Matrix[0] // terse × exact
	if cell.Variant != "terse" || cell.Scorer != "exact" || cell.N != 4 || cell.Mean != 0.25 || !cell.HasBaseline || cell.BaselineMean != 0.75 ||
		cell.DeltaMean != -0.5 || !cell.Regression || cell.Errors != 1 {
		t.Errorf("terse × exact %+v", cell)
	}
	if short := ev.Matrix[1]; short.Scorer != "short" || short.Regression || short.DeltaMean != 0 {
		t.Errorf("terse × short %+v", short)
	}
	if len(ev.NewlyFailing) != 4 || ev.NewlyFailing[0] != "terse / jp / exact" {
		t.Errorf("newly failing %q", ev.NewlyFailing)
	}
	jp := ev.Results[1]
	if jp.Case != "jp" || jp.Variant != "terse" || jp.Pass || len(jp.Scores) != 2 || jp.Scores[0].Scorer != "exact" || jp.Scores[0].Pass ||
		jp.Scores[1].Reason != "the answer has 5 letters" || jp.Calls != 1 || jp.SessionID == "" {
		t.Errorf("jp %+v", jp)
	}
	if out, _ := jp.Output.(map[string]any); out["capital"] != "Osaka" {
		t.Errorf("jp output %v", jp.Output)
	}
	if at := ev.Results[3]; at.Case != "atlantis" || at.Pass || at.Error == "" || at.SessionID != "" {
		t.Errorf("atlantis %+v", at)
	}
	// the case's session is the session API's
	r = ts.do("GET", "/api/sessions/"+jp.SessionID+"/messages", nil)
	ts.expect(r, http.StatusOK, "")

	r = ts.do("GET", "/api/evals/wfrun", nil)
	ts.expect(r, http.StatusNotFound, "not_found")
	if msg := string(r.body); !strings.Contains(msg, "workflow run, not an eval run") {
		t.Errorf("a workflow run: %s", msg)
	}
	ts.expect(ts.do("GET", "/api/evals/nope", nil), http.StatusNotFound, "not_found")
	ts.expect(ts.doAuth("GET", "/api/evals", nil, ""), http.StatusUnauthorized, "unauthorized")
}
