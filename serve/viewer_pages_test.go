package serve

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/workflow"
)

// stageExec runs a workflow's stages for the viewer test: each appends a
// prompt and a reply to its stage session.
type stageExec struct{ store *sessions.Store }

func (x *stageExec) RunStage(ctx context.Context, s *workflow.Stage) (*workflow.StageResult, error) {
	if s.SessionID != "" {
		if _, err := x.store.Apply(ctx, s.SessionID, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: s.Prompt},
			{Role: message.RoleAssistant, Text: "done with " + s.Node.Name, Usage: map[string]any{"input_tokens": int64(20), "output_tokens": int64(4)}}}}); err != nil {
			return nil, err
		}
	}
	return &workflow.StageResult{Output: "output of " + s.Node.Name, Usage: workflow.Usage{InputTokens: 20, OutputTokens: 4}}, nil
}

// viewerFixture stores what the pages show: a session whose loop made
// model and tool calls (with a long tool output, a request's debug
// record, a sub-agent), a fork of it, a failed session, and a workflow
// run of two agent stages. It returns the run's id.
func viewerFixture(t *testing.T, store *sessions.Store) string {
	t.Helper()
	ctx := context.Background()
	must := func(_ []sessions.Event, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Open(ctx, "planner", 0); err != nil {
		t.Fatal(err)
	}
	must(store.SetInfo(ctx, "planner", sessions.Info{Title: strPtr("Plan a trip")}))
	long := make([]string, 60)
	for i := range long {
		long[i] = fmt.Sprintf("line %d of the forecast", i+1)
	}
	cost1, cost2 := 0.0021, 0.0009
	ev := func(typ string, data map[string]any) sessions.Event { return sessions.NewEvent(typ, data) }
	call := func(id string) sessions.Event {
		e := ev("tool_call", map[string]any{"name": "weather", "arguments": map[string]any{"city": "Lisbon"}})
		e.CorrID = id
		return e
	}
	result := func(id string) sessions.Event {
		e := ev("tool_result", map[string]any{"name": "weather", "status": "ok", "duration_ms": int64(35)})
		e.CorrID = id
		return e
	}
	must(store.Apply(ctx, "planner", &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: "Plan a day in Lisbon."}},
		Events: []sessions.Event{ev("turn_start", map[string]any{"iteration": int64(1), "system": "You plan trips.\nBe brief.", "estimated_tokens": int64(412),
			"tools": []any{map[string]any{"name": "weather", "description": "Weather in a city.", "parameters": map[string]any{"type": "object"}}}}),
			ev("llm_call", map[string]any{"provider": "openai", "model": "gpt-test", "latency_ms": int64(840), "input_tokens": int64(120), "output_tokens": int64(18), "cost_usd": cost1, "stop_reason": "tool_use"})}}))
	must(store.Apply(ctx, "planner", &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Model: "gpt-test",
		ToolCalls: []message.ToolCall{{ID: "c1", Name: "weather", Arguments: map[string]any{"city": "Lisbon"}}},
		Usage:     map[string]any{"input_tokens": int64(120), "output_tokens": int64(18)}}},
		Events: []sessions.Event{call("c1")}}))
	must(store.Apply(ctx, "planner", &sessions.Change{Append: []message.Message{{Role: message.RoleTool, ToolCallID: "c1", Name: "weather", Text: strings.Join(long, "\n")}},
		Events: []sessions.Event{result("c1"), ev("turn_end", map[string]any{"iteration": int64(1), "tool_calls": int64(1)})}}))
	if _, err := store.Fork(ctx, "planner", "planner-fork", sessions.ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	must(store.Apply(ctx, "planner", &sessions.Change{
		Events: []sessions.Event{ev("turn_start", map[string]any{"iteration": int64(2), "system": "You plan trips.\nBe brief.", "estimated_tokens": int64(1630)}),
			ev("llm_call", map[string]any{"provider": "openai", "model": "gpt-test", "latency_ms": int64(1210), "input_tokens": int64(1502), "output_tokens": int64(40), "cost_usd": cost2, "stop_reason": "end_turn"})}}))
	must(store.Apply(ctx, "planner", &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Model: "gpt-test", Text: "Sunny: walk to Belém, then lunch in Alfama.",
		Usage: map[string]any{"input_tokens": int64(1502), "output_tokens": int64(40)}}},
		Events: []sessions.Event{ev("turn_end", map[string]any{"iteration": int64(2), "tool_calls": int64(0)})}}))

	if _, err := store.Open(ctx, "broken", 0); err != nil {
		t.Fatal(err)
	}
	must(store.Apply(ctx, "broken", &sessions.Change{AddTurns: 1, Status: sessions.StatusError, Append: []message.Message{{Role: message.RoleUser, Text: "Hello?"}},
		Events: []sessions.Event{ev("error", map[string]any{"message": "openai: auth: incorrect API key provided", "category": "auth", "provider": "openai"})}}))

	g, err := workflow.Decode(map[string]any{"name": "trip", "entry": "research", "nodes": map[string]any{
		"research": map[string]any{"mode": "agent", "prompt": "Research {task}."},
		"write":    map[string]any{"mode": "agent", "prompt": "Write up: {output}"}},
		"edges": []any{map[string]any{"from": "research", "to": "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	r, err := workflow.Execute(ctx, workflow.Options{Graph: g, Task: "Lisbon", Executor: &stageExec{store: store}, Store: store,
		NewID: func() string { n++; return fmt.Sprintf("run%d", n) }})
	if err != nil || r.Status != workflow.StatusCompleted {
		t.Fatalf("workflow: %v, %v", r, err)
	}
	return r.ID
}

func strPtr(s string) *string { return &s }

// openBrowser starts headless Chromium (skipping the test when there is
// none, failing instead when $SKEIN_REQUIRE_BROWSER is set) and returns
// its tab's context, valid for timeout, with do (run steps, failing the
// test with what) and text (the text of a CSS selector).
func openBrowser(t *testing.T, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) (context.Context,
	func(what string, steps ...chromedp.Action[chromedp.Void]), func(sel string) string) {
	t.Helper()
	browser := findBrowser()
	if browser == "" {
		if os.Getenv(requireBrowserEnv) != "" {
			t.Fatalf("no Chromium found in PATH, and %s is set: install Debian's chromium (apt-get install chromium)", requireBrowserEnv)
		}
		t.Skipf("no Chromium found in PATH: install Debian's chromium to run the viewer test (CI sets %s, which makes this a failure)", requireBrowserEnv)
	}
	opts := append(append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true), chromedp.Flag("no-first-run", true), chromedp.UserDataDir(t.TempDir())), extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx); err != nil { // start the browser and its tab
		t.Fatalf("starting %s: %v", browser, err)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	return ctx, do, text
}

// TestViewerPagesInBrowser drives every page of the viewer in headless
// Chromium: the list as a tree, lineage both ways with a child appearing
// live, the timeline and its totals against the stored usage, the debug
// view's request record, a long output collapsed, why a session ended,
// the runs list and a run's graph and stages, the eval runs and an eval
// run's matrix and cases with a case's session. It takes a screenshot of
// each page into $SKEIN_ARTIFACTS and fails if any text node reads
// "null" or "undefined".
func TestViewerPagesInBrowser(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"helper": &gatedAgent{store: store, gate: make(chan struct{}, 1)}}})
	runID := viewerFixture(t, store)
	evalBase, evalBroken := evalFixture(t, store)
	ctx, do, text := openBrowser(t, 120*time.Second, chromedp.WindowSize(1280, 900))
	dir := os.Getenv("SKEIN_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// page checks what every page must hold to: no text node reading
	// null or undefined (hidden ones included), then takes its screenshot.
	page := func(name string) {
		t.Helper()
		bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			const out = [];
			const w = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
			for (let n = w.nextNode(); n; n = w.nextNode()) if (/\b(null|undefined|NaN)\b/.test(n.data)) out.push(n.data.slice(0, 120));
			for (const e of document.querySelectorAll("[title],[aria-label],[placeholder],[href]"))
				for (const a of ["title", "aria-label", "placeholder", "href"]) { const v = e.getAttribute(a); if (v && /\b(null|undefined|NaN)\b/.test(v)) out.push(a + "=" + v); }
			return out;
		})()`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(bad) > 0 {
			t.Errorf("page %s shows null/undefined: %q", name, bad)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100) /* 100: PNG */)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "viewer-"+name+".png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	}

	// The list: a tree, the fork under its parent; live.
	do("list", chromedp.Navigate(ts.http.URL+"/?token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="planner-fork"][data-depth="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="planner"][data-depth="0"]`)))
	if rows := text("tbody"); !strings.Contains(rows, "Plan a trip") || !strings.Contains(rows, "1 child") || !strings.Contains(rows, "Research Lisbon.") {
		t.Fatalf("list: %q", rows)
	}
	if _, err := store.Open(context.Background(), "late", 0); err != nil {
		t.Fatal(err)
	}
	do("live list", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="late"]`)))
	page("list")

	// A fork links to its parent, and back.
	do("fork page", chromedp.Navigate(ts.http.URL+"/sessions/planner-fork"),
		chromedp.WaitVisible(chromedp.CSS(`#parent a[href="/sessions/planner"]`)))
	page("fork")
	do("parent page", chromedp.Click(chromedp.CSS(`#parent a`)),
		chromedp.WaitVisible(chromedp.CSS(`#children li[data-id="planner-fork"]`)))
	// A sub-agent appears under its parent live.
	if _, err := store.Fork(context.Background(), "planner", "planner-sub", sessions.ForkOptions{KeepFirst: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Apply(context.Background(), "planner", &sessions.Change{Events: []sessions.Event{sessions.NewEvent("subagent_start",
		map[string]any{"child_id": "planner-sub", "task": "check the ferry times", "carry": "reset"})}}); err != nil {
		t.Fatal(err)
	}
	do("live child", chromedp.WaitVisible(chromedp.CSS(`#children li[data-id="planner-sub"]`)))
	// Long outputs start collapsed (verbose view shows tool results).
	do("verbose", chromedp.Click(chromedp.CSS(`label:has(#view-verbose)`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript article[data-role="tool"] details.more`)))
	if v := text(`#transcript article[data-role="tool"] .clipped`); !strings.Contains(v, "line 12 of the forecast") || strings.Contains(v, "line 13 of") {
		t.Fatalf("collapsed tool output: %q", v)
	}
	page("session")

	// The timeline: every model and tool call with duration and tokens,
	// and totals equal to the stored usage.
	do("timeline", chromedp.Click(chromedp.CSS(`label:has(#view-timeline)`)),
		chromedp.WaitVisible(chromedp.CSS(`#totals`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.item.subagent`)))
	var in, out int64
	msgs := ts.do("GET", "/api/sessions/planner", nil).json()["messages"].([]any)
	for _, m := range msgs {
		if u, ok := m.(map[string]any)["usage"].(map[string]any); ok {
			in += int64(u["input_tokens"].(float64))
			out += int64(u["output_tokens"].(float64))
		}
	}
	if got, want := text(`dd[data-total="inputTokens"]`), fmt.Sprintf("%d", in); strings.ReplaceAll(got, ",", "") != want {
		t.Errorf("input tokens total %q, stored usage %s", got, want)
	}
	if got, want := text(`dd[data-total="outputTokens"]`), fmt.Sprintf("%d", out); strings.ReplaceAll(got, ",", "") != want {
		t.Errorf("output tokens total %q, stored usage %s", got, want)
	}
	if got := text(`dd[data-total="cost"]`); got != "$0.0030" {
		t.Errorf("cost total %q", got)
	}
	tl := text("#transcript")
	for _, want := range []string{"turn 1", "turn 2", "gpt-test", "840 ms", "1.21 s", "120 in · 18 out", "weather", "35 ms", "sub-agent planner-sub", "$0.0021"} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline lacks %q:\n%s", want, tl)
		}
	}
	page("timeline")

	// The debug view: the exact system prompt, the tool schemas and the
	// token estimate of each call.
	// (Each summary is scrolled to the middle of the window first: at the
	// bottom, where a plain scroll into view leaves it, the prompt box
	// that stays at the bottom of the window covers it and takes the
	// click.)
	center := func(sel string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[bool](`(document.querySelector(`+strconv.Quote(sel)+`).scrollIntoView({block: "center"}), true)`)(ctx, tg)
			return chromedp.Void{}, err
		}
	}
	do("debug", chromedp.Click(chromedp.CSS(`label:has(#view-debug)`)),
		chromedp.WaitVisible(chromedp.CSS(`div.request[data-event="turn_start"]`)),
		center(`div.request details.system-prompt summary`),
		chromedp.Click(chromedp.CSS(`div.request details.system-prompt summary`)),
		center(`div.request details.tool-schemas summary`),
		chromedp.Click(chromedp.CSS(`div.request details.tool-schemas summary`)))
	if d := text(`div.request[data-event="turn_start"]`); !strings.Contains(d, "~412 tokens estimated") || !strings.Contains(d, "You plan trips.\nBe brief.") || !strings.Contains(d, `"description": "Weather in a city."`) {
		t.Errorf("debug request: %q", d)
	}
	page("debug")

	// Why a session ended.
	do("ended", chromedp.Navigate(ts.http.URL+"/sessions/broken"),
		chromedp.WaitVisible(chromedp.CSS(`#ended .notice`)))
	if e := text("#ended"); !strings.Contains(e, "ended: error") || !strings.Contains(e, "openai: auth: incorrect API key provided") {
		t.Errorf("ended: %q", e)
	}
	// a session in error takes prompts (one reactivates it): the box is
	// enabled
	do("errored prompt box", chromedp.WaitReady(chromedp.CSS(`#prompt:enabled`)))
	page("ended")

	// Workflow runs: the list, a run's graph, stages and their sessions.
	do("runs", chromedp.Navigate(ts.http.URL+"/runs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+runID+`"]`)))
	if r := text("tbody"); !strings.Contains(r, "trip") || !strings.Contains(r, "completed") {
		t.Errorf("runs: %q", r)
	}
	page("runs")
	do("run", chromedp.Click(chromedp.CSS(`tr[data-id="`+runID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#graph .node[data-node="write"]`)))
	if g := text("#graph"); !strings.Contains(g, "research") || !strings.Contains(g, "→ write") {
		t.Errorf("graph: %q", g)
	}
	if s := text("table.steps"); !strings.Contains(s, "research") || !strings.Contains(s, "done") || !strings.Contains(s, "20 in · 4 out") || !strings.Contains(s, runID+"/write") {
		t.Errorf("stages: %q", s)
	}
	page("run")
	// A stage's session page links back to its run.
	do("stage session", chromedp.Click(chromedp.CSS(`table.steps tr[data-node="write"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#run a[href="/runs/`+runID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript article[data-role="assistant"]`)))
	page("stage")
	if r := ts.do("GET", "/api/sessions/"+runID+"%2Fwrite/timeline", nil); r.status != http.StatusOK {
		t.Errorf("stage timeline: %d %s", r.status, r.body)
	}

	// Eval runs: the list with totals and regressions, a run's matrix
	// (deltas against its baseline, the regressions flagged), its cases,
	// and a case's session page.
	do("evals", chromedp.Navigate(ts.http.URL+"/evals"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+evalBroken+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="`+evalBase+`"]`)))
	if r := text(`tr[data-id="` + evalBroken + `"]`); !strings.Contains(r, "capitals_eval.star") || !strings.Contains(r, "4 × 2 variants × 1") ||
		!strings.Contains(r, "50%") || !strings.Contains(r, "2 regressions") || !strings.Contains(r, "2 failed tasks") {
		t.Errorf("evals: %q", r)
	}
	page("evals")
	do("eval", chromedp.Click(chromedp.CSS(`tr[data-id="`+evalBroken+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#matrix td[data-scorer="exact"]`)))
	if m := text(`#matrix tr[data-variant="terse"] td[data-scorer="exact"][data-regression="true"]`); !strings.Contains(m, "0.25") || !strings.Contains(m, "−0.50 vs 0.75") || !strings.Contains(m, "25% pass") {
		t.Errorf("terse × exact: %q", m)
	}
	if m := text(`#matrix tr[data-variant="chatty"]`); !strings.Contains(m, "temperature=0.7") {
		t.Errorf("chatty: %q", m)
	}
	if n := text("#newly-failing"); !strings.Contains(n, "terse / jp / exact") {
		t.Errorf("newly failing: %q", n)
	}
	if c := text(`#cases tr[data-case="jp"][data-variant="terse"]`); !strings.Contains(c, "✗ exact 0.00") || !strings.Contains(c, `got "Osaka", want "Tokyo"`) ||
		!strings.Contains(c, "the answer has 5 letters") || !strings.Contains(c, "1 call") {
		t.Errorf("case jp: %q", c)
	}
	if c := text(`#cases tr[data-case="atlantis"][data-variant="terse"]`); !strings.Contains(c, "task failed: ") || !strings.Contains(c, "no such country: Atlantis") {
		t.Errorf("case atlantis: %q", c)
	}
	page("eval")
	do("failing only", chromedp.Click(chromedp.CSS(`#only-failing`)), chromedp.WaitNotPresent(chromedp.CSS(`#cases tr[data-case="fr"]`)))
	do("case session", chromedp.Click(chromedp.CSS(`#cases tr[data-case="jp"][data-variant="terse"] a.case-session`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript article[data-role="assistant"]`)))
	if tr := text("#transcript"); !strings.Contains(tr, "The capital of Japan?") {
		t.Errorf("case session: %q", tr)
	}
	page("eval-case")
}
