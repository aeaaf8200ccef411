package eval_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/eval/evalfile"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// suite loads src as an eval file into a test VM.
func suite(t testing.TB, src string) (*vm.State, *evalfile.StarlarkSuite) {
	t.Helper()
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard}, 1)
	if err != nil {
		t.Fatal(err)
	}
	st.Begin(context.Background())
	globals, err := st.ExecFile("e.star", src)
	if err != nil {
		t.Fatal(vm.FormatError(err))
	}
	s, err := evalfile.NewStarlarkSuite(evalfile.StarlarkConfig{State: st, Globals: globals, RunID: "run1", CheckOptions: builtins.CheckCallDefaults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return st, s
}

func TestStarlarkSuite(t *testing.T) {
	st, s := suite(t, `
DATASET = [{"id": "a", "q": "alpha", "expected": "ALPHA"}, {"id": "b", "q": "beta", "expected": "BETA"}, {"q": "boom", "expected": "x"}]
VARIANTS = [{"name": "upper", "model": "m-upper"}, {"model": "m2", "temperature": 0.5}]

def task(case, variant):
    if case["q"] == "boom":
        fail("kaput")
    r = llm_call("say " + case["q"])
    return {"text": case["q"].upper() if variant["name"] == "upper" else case["q"], "model": r["model"]}

score_exact = exact(field = "text")
score_long = regex("^.{5,}$", field = "text")

def score_half(case, result):
    return 0.5
`)
	if got := s.Variants(); len(got) != 2 || got[0].Name != "upper" || got[1].Name != "m2, temperature=0.5" {
		t.Errorf("variants %+v", got)
	}
	if got := s.Cases(); got[0].ID != "a" || got[2].ID != "#3" || got[2].Label() != "case 3" || got[0].Label() != "case 1 ('a')" {
		t.Errorf("cases %+v", got)
	}
	rec, err := eval.Run(context.Background(), s, eval.Options{ID: "run1", Name: "e", Repeat: 2, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Results) != 12 {
		t.Fatalf("%d results", len(rec.Results))
	}
	first := rec.Results[0]
	if first.Variant != "upper" || first.Case != "a" || first.Repeat != 0 || first.SessionID != "run1-v1-c1-r1" || first.Calls != 1 || !first.CostKnown {
		t.Errorf("first result %+v", first)
	}
	// the variant's model was every call's default, on the case's session
	if out := first.Output.(map[string]any); out["model"] != "m-upper" || out["text"] != "ALPHA" {
		t.Errorf("first output %v", first.Output)
	}
	if ok, _ := st.Store.Exists(context.Background(), "run1-v2-c2-r2"); !ok {
		t.Error("the case's session was not stored")
	}
	boom := rec.Results[4] // variants, then cases, then repeats
	if boom.Error == "" || !strings.Contains(boom.Error, "kaput") || boom.Scores["exact"].Pass || !strings.Contains(boom.Scores["exact"].Reason, "the task failed") {
		t.Errorf("failing task %+v", boom)
	}
	cell, _ := rec.Cell("upper", "exact")
	if cell.N != 6 || cell.Errors != 2 || cell.PassRate != 4.0/6 {
		t.Errorf("upper/exact %+v", cell)
	}
	if cell, _ := rec.Cell("m2, temperature=0.5", "exact"); cell.PassRate != 0 {
		t.Errorf("m2/exact %+v", cell)
	}
	if cell, _ := rec.Cell("upper", "half"); cell.Mean != 0.5*4/6 || cell.PassRate != 4.0/6 {
		t.Errorf("upper/half %+v", cell)
	}
	var text, page bytes.Buffer
	if err := eval.WriteText(&text, rec); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 cases × 2 variants × 2 repeats = 12 runs", "upper / #3 / repeat 1: the task failed: ", `m2, temperature=0.5 / a / repeat 1 / exact: got "alpha", want "ALPHA"`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	if err := eval.WriteHTML(&page, rec); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), "<svg"); n != 3 {
		t.Errorf("%d charts, want one per scorer (3)", n)
	}

	// stored, loaded, found as the previous run
	if err := eval.Save(context.Background(), st.Store, rec); err != nil {
		t.Fatal(err)
	}
	back, err := eval.Load(context.Background(), st.Store, "run1")
	if err != nil || len(back.Results) != 12 || back.Results[0].SessionID != "run1-v1-c1-r1" || len(back.Matrix) != 6 {
		t.Fatalf("loaded %+v %v", back, err)
	}
	prev, err := eval.Previous(context.Background(), st.Store, "e", "run2")
	if err != nil || prev == nil || prev.ID != "run1" {
		t.Errorf("previous %v %v", prev, err)
	}
	if prev, _ := eval.Previous(context.Background(), st.Store, "e", "run1"); prev != nil {
		t.Errorf("a run is its own previous")
	}
}

func TestSuiteErrors(t *testing.T) {
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard}, 1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ src, err string }{
		{`def task(c): pass
def score_x(c, r): pass`, "the file defines no DATASET"},
		{`DATASET = "cases.jsonl"`, "DATASET: got string, want a list of dicts"},
		{`DATASET = [{"id": 1}, "x"]`, "DATASET: case 2: got string, want dict"},
		{`DATASET = [{"id": "a"}, {"id": "a"}]`, "DATASET: case 2: id 'a' is also case 1's"},
		{`DATASET = [{}]
def score_x(c, r): pass`, "the file defines no task(case) function"},
		{`DATASET = [{}]
def task(a, b, c): pass`, "task must take (case) or (case, variant), not 3 parameters"},
		{`DATASET = [{}]
def task(c): pass`, "the file defines no scorer"},
		{`DATASET = [{}]
def task(c): pass
def score_x(c, r): pass
VARIANTS = [{"temperature": "hot"}]`, "VARIANTS[0]: option 'temperature': got string, want float"},
		{`DATASET = [{}]
def task(c): pass
def score_x(c, r): pass
VARIANTS = [{"name": "a"}, {"name": "a", "model": "m"}]`, "VARIANTS[1]: variant 'a' is also VARIANTS[0]'s name"},
	}
	for _, tc := range tests {
		globals, err := st.ExecFile("e.star", tc.src)
		if err != nil {
			t.Fatal(vm.FormatError(err))
		}
		_, err = evalfile.NewStarlarkSuite(evalfile.StarlarkConfig{State: st, Globals: globals, RunID: "r", CheckOptions: builtins.CheckCallDefaults})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s:\n got %v\nwant %q", tc.src, err, tc.err)
		}
	}
}

func TestParseScore(t *testing.T) {
	_, s := suite(t, `
DATASET = [{"id": "a"}]
def task(c): return None
def score_ok(c, r): return {"score": 0.4, "reason": "close", "pass": True}
def score_bad(c, r): return 1.5
`)
	_, err := eval.Run(context.Background(), s, eval.Options{ID: "run1"})
	if err == nil || err.Error() != "case 1 ('a'), variant 'default', repeat 1: score_bad returned 1.5, want a number in [0, 1]" {
		t.Errorf("got %v", err)
	}
}

// countingProvider answers every call with its text, counting them.
type countingProvider struct {
	calls atomic.Int64
	delay time.Duration
}

func (p *countingProvider) Name() string { return "fake" }
func (p *countingProvider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p.calls.Add(1)
	if p.delay > 0 {
		if err := llm.SleepContext(ctx, p.delay); err != nil {
			return nil, err
		}
	}
	return &llm.Response{Text: "hi " + req.Messages[len(req.Messages)-1].Text, Model: req.Model, Usage: llm.Usage{InputTokens: 3, OutputTokens: 2}}, nil
}

func TestCache(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cache, err := eval.OpenCache(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	real := &countingProvider{}
	p := cache.Wrap(real)
	req := func(text string, temp float64) *llm.Request {
		return &llm.Request{Model: "m", Temperature: &temp, Messages: []message.Message{{Role: "user", Text: text}}}
	}
	r0, r1 := eval.WithJob(ctx, 0), eval.WithJob(ctx, 1)
	for _, c := range []struct {
		ctx  context.Context
		req  *llm.Request
		want int64
	}{
		{r0, req("a", 0), 1}, {r0, req("a", 0), 1}, // the same request: cached
		{r1, req("a", 0), 2},   // another repeat: sampled again
		{r0, req("a", 0.5), 3}, // another temperature
		{r0, req("b", 0), 4},   // another prompt
	} {
		resp, err := p.Complete(c.ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := real.calls.Load(); got != c.want {
			t.Errorf("after %q: %d provider calls, want %d", c.req.Messages[0].Text, got, c.want)
		}
		if resp.Text != "hi "+c.req.Messages[0].Text {
			t.Errorf("reply %q", resp.Text)
		}
	}
	if cache.Hits() != 1 || cache.Misses() != 4 || eval.JobCached(r0) != 1 {
		t.Errorf("hits %d misses %d", cache.Hits(), cache.Misses())
	}
	if err := cache.Save(ctx); err != nil {
		t.Fatal(err)
	}
	// a new process: the entries come from the store
	again, err := eval.OpenCache(ctx, store)
	if err != nil || again.Len() != 4 {
		t.Fatalf("reopened: %d entries, %v", again.Len(), err)
	}
	j := eval.WithJob(ctx, 1)
	resp, err := again.Wrap(real).Complete(j, req("a", 0))
	if err != nil || real.calls.Load() != 4 || resp.Usage != (llm.Usage{}) || eval.JobCached(j) != 1 {
		t.Errorf("reopened cache: %v, %d calls, usage %+v", err, real.calls.Load(), resp.Usage)
	}
	if _, err := again.Wrap(real).Complete(j, req("c", 0)); err != nil {
		t.Fatal(err)
	}
	if err := again.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if third, _ := eval.OpenCache(ctx, store); third.Len() != 5 {
		t.Errorf("after a second save: %d entries, want 5", third.Len())
	}
}

// TestVariantDefaults: a variant's options are the defaults of every
// llm_call, agent_loop and agent_spawn of the task; an option a call
// gives wins.
func TestVariantDefaults(t *testing.T) {
	_, s := suite(t, `
DATASET = [{"id": "a"}]
VARIANTS = [{"name": "v", "model": "m-variant", "system": "be brief", "max_tokens": 77}]
seen = []

def delegate(q):
    """Ask a sub-agent.

    Args:
      q: the question.
    """
    return agent_spawn(q, carry = "reset")["text"]

def task(case):
    llm_mock(tool_calls = [{"name": "delegate", "arguments": {"q": "sub"}}])
    llm_mock(text = "child")
    llm_mock(text = "parent")
    llm_mock(text = "own")
    agent_loop("go", tools = [delegate])
    llm_call("mine", model = "m-own", system = "mine")
    return [(c["model"], c["system"]) for c in llm_mock_calls()]

score_x = exact(key = "id")
`)
	rec, err := eval.Run(context.Background(), s, eval.Options{ID: "run1", Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Results[0].Output
	want := []any{[]any{"m-variant", "be brief"}, []any{"m-variant", "be brief"}, []any{"m-variant", "be brief"}, []any{"m-own", "mine"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls (model, system):\n got %v\nwant %v", got, want)
	}
}
