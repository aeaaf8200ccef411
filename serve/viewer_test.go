package serve

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// requireBrowserEnv, when set (CI sets it), turns the viewer test's skip
// for a missing browser into a failure.
const requireBrowserEnv = "SKEIN_REQUIRE_BROWSER"

// findBrowser returns the path of a Chromium-based browser, or "".
func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// gatedAgent replies only when its gate is opened, so a test sees the
// turn running and then the reply arriving.
type gatedAgent struct {
	store *sessions.Store
	gate  chan struct{}
}

func (a *gatedAgent) Handle(ctx context.Context, id, text string) error {
	if _, err := a.store.Apply(ctx, id, &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
		return err
	}
	if strings.HasPrefix(text, "use a tool") {
		if _, err := a.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{
			{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "lookup", Arguments: map[string]any{"q": "x"}}}},
			{Role: message.RoleTool, ToolCallID: "c1", Name: "lookup", Text: "tool output here"}}}); err != nil {
			return err
		}
	}
	a.store.Publish(sessions.Event{Type: agent.EventState, SessionID: id, Data: map[string]any{"state": agent.StateLLMGenerating}})
	select {
	case <-a.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	a.store.Publish(sessions.Event{Type: "text_delta", SessionID: id, Data: map[string]any{"text": "echo: "}})
	_, err := a.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "echo: " + text}},
		Events: []sessions.Event{sessions.NewEvent("turn_end", map[string]any{"iteration": int64(1)})}})
	return err
}

// TestViewerInBrowser drives the transcript viewer in headless Chromium:
// sign in, the list, a session, a prompt whose reply arrives live, the
// three views, cancel, and a screenshot (written to $SKEIN_ARTIFACTS
// when set). Every request the page makes goes to the server.
func TestViewerInBrowser(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	ag := &gatedAgent{store: store, gate: make(chan struct{}, 10)}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"helper": ag}})
	ts.expect(ts.do("POST", "/api/sessions", map[string]any{"id": "other", "title": "Another session"}), http.StatusCreated, "")
	ts.expect(ts.do("POST", "/api/sessions", map[string]any{"id": "demo", "title": "Demo session", "repoId": "repo-1"}), http.StatusCreated, "")
	ag.gate <- struct{}{}
	ts.expect(ts.do("POST", "/api/sessions/demo/prompt", map[string]any{"text": "use a tool please"}), http.StatusAccepted, "")
	ts.waitIdle("demo")

	ctx, do, text := openBrowser(t, 90*time.Second)
	var mu sync.Mutex
	var foreign []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			if !strings.HasPrefix(e.Request.URL, ts.http.URL) && !strings.HasPrefix(e.Request.URL, "data:") {
				mu.Lock()
				foreign = append(foreign, e.Request.URL)
				mu.Unlock()
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	// Sign in: the token leaves the address bar.
	do("sign in and list", chromedp.Navigate(ts.http.URL+"/?token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="demo"]`)))
	if u := location(); strings.Contains(u, "token") {
		t.Fatalf("token still in the address: %s", u)
	}
	if rows := text("tbody"); !strings.Contains(rows, "Demo session") || !strings.Contains(rows, "Another session") {
		t.Fatalf("list: %q", rows)
	}
	// Filter by text, with the keyboard.
	do("filter", chromedp.Focus(chromedp.ID("f-q")), chromedp.SendKeys(chromedp.ID("f-q"), "demo"),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-id="other"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="demo"]`)))

	// Open the session: basic view shows user and assistant text only.
	do("open session", chromedp.Click(chromedp.CSS(`tr[data-id="demo"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript article[data-role="assistant"]`)))
	if h, basic := text("h1"), text("#transcript"); h != "Demo session" || !strings.Contains(basic, "use a tool please") || strings.Contains(basic, "tool output here") {
		t.Fatalf("basic view: %q / %q", h, basic)
	}
	if m := text("#session-meta"); !strings.Contains(m, " · 1 turn · ") {
		t.Errorf("the head after one turn: %q", m)
	}

	// A prompt: the turn runs, then its reply arrives live over SSE.
	// The head shows what the loop is doing (its state events).
	do("send prompt", chromedp.SendKeys(chromedp.ID("prompt"), "hello live"), chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.ID("running")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="running"][contains(., "generating")]`)))
	ag.gate <- struct{}{}
	do("live reply", chromedp.WaitVisible(chromedp.Search(`//article[@data-role="assistant"][contains(., "echo: hello live")]`)),
		chromedp.WaitNotPresent(chromedp.ID("running")))

	// Prompts sent while a turn runs are queued: the page says at which
	// position, the head shows how many wait, live (the server's queue
	// events), and they run in order.
	queued := func(n string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.Search(`//span[@id="queued"][contains(., "` + n + ` queued")]`))
	}
	do("queue prompts", chromedp.SendKeys(chromedp.ID("prompt"), "first"), chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.ID("running")),
		chromedp.WaitVisible(chromedp.Search(`//button[@id="send"][.="Queue"]`)),
		chromedp.SendKeys(chromedp.ID("prompt"), "second"), chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="queued-notice"][contains(., "Queued (position 1)")]`)), queued("1"),
		chromedp.SendKeys(chromedp.ID("prompt"), "third"), chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="queued-notice"][contains(., "Queued (position 2)")]`)), queued("2"))
	ag.gate <- struct{}{}
	do("queue moves", queued("1"), chromedp.WaitVisible(chromedp.Search(`//article[@data-role="assistant"][contains(., "echo: first")]`)))
	ag.gate <- struct{}{}
	ag.gate <- struct{}{}
	do("queue drained", chromedp.WaitVisible(chromedp.Search(`//article[@data-role="assistant"][contains(., "echo: third")]`)),
		chromedp.WaitNotPresent(chromedp.ID("running")), chromedp.WaitNotPresent(chromedp.ID("queued")),
		chromedp.WaitNotPresent(chromedp.ID("queued-notice")))
	var order []string
	for _, m := range ts.do("GET", "/api/sessions/demo", nil).json()["messages"].([]any) {
		if c, _ := m.(map[string]any)["content"].(string); m.(map[string]any)["role"] == "assistant" && c != "" {
			order = append(order, c)
		}
	}
	if got := strings.Join(order[len(order)-3:], ", "); got != "echo: first, echo: second, echo: third" {
		t.Fatalf("queued prompts ran as %s", got)
	}

	// Views: verbose shows the tool call and result; debug the events.
	do("verbose view", chromedp.Click(chromedp.CSS(`label:has(#view-verbose)`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript article[data-role="tool"]`)))
	if v := text("#transcript"); !strings.Contains(v, "lookup") || !strings.Contains(v, "tool output here") {
		t.Fatalf("verbose view: %q", v)
	}
	// The v key cycles to debug (focus outside the prompt box).
	do("debug view", chromedp.Focus(chromedp.ID("view-verbose")), chromedp.KeyEvent("v"),
		chromedp.WaitVisible(chromedp.CSS(`#transcript div[data-event="turn_end"]`)))
	if d, u := strings.ToLower(text("#transcript")), location(); !strings.Contains(d, "event turn_end · seq 6") || !strings.Contains(u, "view=debug") {
		t.Fatalf("debug view: %q at %s", d, u)
	}

	// Cancel a running turn from the page; the session stays active.
	do("cancel", chromedp.SendKeys(chromedp.ID("prompt"), "never answered"), chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.ID("running")),
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitNotPresent(chromedp.ID("running")),
		chromedp.WaitEnabled(chromedp.ID("prompt")))
	if g := ts.do("GET", "/api/sessions/demo", nil).json(); g["status"] != "active" || g["running"] != false {
		t.Fatalf("after cancel: %v", g)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("SKEIN_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "viewer-session.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	// A session that can take no more prompts (completed) shows the
	// prompt box disabled (an active or errored one takes prompts).
	ts.expect(ts.do("POST", "/api/sessions/demo/complete", nil), http.StatusOK, "")
	do("completed", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("transcript")),
		chromedp.WaitReady(chromedp.CSS(`#prompt:disabled`)), chromedp.WaitReady(chromedp.CSS(`#send:disabled`)))

	mu.Lock()
	defer mu.Unlock()
	if len(foreign) > 0 {
		t.Fatalf("the viewer made requests elsewhere: %v", foreign)
	}
}
