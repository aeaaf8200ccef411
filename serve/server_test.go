package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

func TestCreateGetList(t *testing.T) {
	ts := newTestServer(t, Config{MaxSessions: 10})
	r := ts.do("POST", "/api/sessions", map[string]any{"repoId": "repo-1", "title": "First", "metadata": map[string]any{"user": "ann"}})
	ts.expect(r, http.StatusCreated, "")
	s := r.json()
	for _, k := range []string{"id", "agent", "repoId", "title", "metadata", "status", "messageCount", "turns", "parentId", "createdAt", "updatedAt"} {
		if _, ok := s[k]; !ok {
			t.Errorf("session object has no %q: %s", k, r.body)
		}
	}
	if s["status"] != "active" || s["repoId"] != "repo-1" || s["agent"] != "echo" || s["title"] != "First" {
		t.Fatalf("created %s", r.body)
	}
	if _, err := time.Parse(time.RFC3339, s["createdAt"].(string)); err != nil {
		t.Fatalf("createdAt: %v", err)
	}
	id := s["id"].(string)
	second := ts.create(map[string]any{"repoId": "repo-2", "id": "custom-id"})
	if second != "custom-id" {
		t.Fatalf("id %q", second)
	}
	ts.expect(ts.do("POST", "/api/sessions", map[string]any{"id": "custom-id"}), http.StatusConflict, "exists")
	ts.expect(ts.do("POST", "/api/sessions", map[string]any{"agent": "nope"}), http.StatusNotFound, "unknown_agent")

	r = ts.do("GET", "/api/sessions/"+id, nil)
	ts.expect(r, http.StatusOK, "")
	if msgs, ok := r.json()["messages"].([]any); !ok || len(msgs) != 0 {
		t.Fatalf("get: %s", r.body)
	}
	ts.expect(ts.do("GET", "/api/sessions/missing", nil), http.StatusNotFound, "not_found")

	r = ts.do("GET", "/api/sessions", nil)
	ts.expect(r, http.StatusOK, "")
	l := r.json()
	list := l["sessions"].([]any)
	if l["total"].(float64) != 2 || l["limit"].(float64) != 20 || l["offset"].(float64) != 0 || len(list) != 2 {
		t.Fatalf("list: %s", r.body)
	}
	if list[0].(map[string]any)["id"] != "custom-id" {
		t.Fatalf("list is not newest first: %s", r.body)
	}
	if _, ok := list[0].(map[string]any)["messages"]; ok {
		t.Fatalf("list includes messages: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?repoId=repo-1", nil)
	if l := r.json(); l["total"].(float64) != 1 || l["sessions"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("repoId filter: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?limit=1&offset=1", nil)
	if l := r.json(); l["total"].(float64) != 2 || len(l["sessions"].([]any)) != 1 || l["sessions"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("paging: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?repoId=repo-1&limit=1&offset=1", nil)
	if l := r.json(); l["total"].(float64) != 1 || len(l["sessions"].([]any)) != 0 {
		t.Fatalf("filtered paging: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?where="+url.QueryEscape(`metadata.user == "ann" && title == "First"`), nil)
	if l := r.json(); l["total"].(float64) != 1 || l["sessions"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("where: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?q=FIRS", nil)
	if l := r.json(); l["total"].(float64) != 1 {
		t.Fatalf("text search: %s", r.body)
	}
	ts.expect(ts.do("GET", "/api/sessions?where="+url.QueryEscape("turns >"), nil), http.StatusBadRequest, "bad_where")
	ts.expect(ts.do("GET", "/api/sessions?where="+url.QueryEscape("nosuchname == 1"), nil), http.StatusBadRequest, "bad_where")
	ts.expect(ts.do("DELETE", "/api/sessions/custom-id", nil), http.StatusOK, "")
	r = ts.do("GET", "/api/sessions?status=active,error", nil)
	if l := r.json(); l["total"].(float64) != 1 {
		t.Fatalf("status filter: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?status=cancelled&agent=echo", nil)
	if l := r.json(); l["total"].(float64) != 1 || l["sessions"].([]any)[0].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("status and agent filter: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions?agent=other", nil)
	if l := r.json(); l["total"].(float64) != 0 {
		t.Fatalf("agent filter: %s", r.body)
	}
}

func TestAuth(t *testing.T) {
	ts := newTestServer(t, Config{})
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken, "Bearer " + testToken + "x"} {
		r := ts.doAuth("GET", "/api/sessions", nil, auth)
		ts.expect(r, http.StatusUnauthorized, "unauthorized")
		if strings.Contains(string(r.body), testToken) {
			t.Fatal("a 401 shows the token")
		}
	}
	ts.expect(ts.doAuth("GET", "/metrics", nil, ""), http.StatusUnauthorized, "unauthorized")
	ts.expect(ts.doAuth("GET", "/healthz", nil, ""), http.StatusOK, "")
	ts.expect(ts.doAuth("GET", "/api/sessions", nil, "bearer "+testToken), http.StatusOK, "")

	// Viewer sign-in: ?token= sets the cookie and redirects without it.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.http.URL + "/sessions/abc?token=" + testToken + "&view=debug")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sessions/abc?view=debug" {
		t.Fatalf("sign-in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, tokenCookie+"_") {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("cookie %+v", cookie)
	}
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/sessions", nil)
	req.AddCookie(cookie)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cookie auth: %d", resp.StatusCode)
	}
	resp, err = client.Get(ts.http.URL + "/?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong sign-in: %d", resp.StatusCode)
	}
	// a person opened the link: a page, not the API's JSON
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" || !strings.Contains(string(page), "<h1>Sign-in failed</h1>") {
		t.Fatalf("wrong sign-in shows %s:\n%s", ct, page)
	}
}

func TestMaxSessions(t *testing.T) {
	ts := newTestServer(t, Config{MaxSessions: 2})
	// Sessions a script made in the same store have no agent: they do
	// not count against --max-sessions, whether their metadata has no
	// "agent" or an empty one.
	for i, meta := range []map[string]any{nil, {"agent": ""}, {"agent": int64(7)}} {
		if err := ts.store.Create(t.Context(), "script-"+strconv.Itoa(i), sessions.Info{Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	a := ts.create(nil)
	ts.create(nil)
	r := ts.do("POST", "/api/sessions", nil)
	ts.expect(r, http.StatusTooManyRequests, "too_many_sessions")
	if r.header.Get("Retry-After") != "60" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if msg := r.json()["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "--max-sessions 2") || !strings.Contains(msg, "retry in 60 seconds") {
		t.Fatalf("message %q", msg)
	}
	ts.expect(ts.do("DELETE", "/api/sessions/"+a, nil), http.StatusOK, "")
	ts.create(nil)
}

// TestMemoryStoreCap: with a store that is not durable, a session
// pushed out of memory is gone, so the server refuses the session past
// --session-cap instead of dropping the least recently used one.
func TestMemoryStoreCap(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(2))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store})
	ids := []string{ts.create(nil), ts.create(nil)}
	r := ts.do("POST", "/api/sessions", nil)
	ts.expect(r, http.StatusTooManyRequests, "session_cap")
	if msg := r.json()["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "--session-cap 2") {
		t.Fatalf("message %q", msg)
	}
	for _, id := range ids {
		ts.expect(ts.do("GET", "/api/sessions/"+id, nil), http.StatusOK, "")
	}
}

func TestPrompt(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	r := ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hello"})
	ts.expect(r, http.StatusAccepted, "")
	if p := r.json(); p["sessionId"] != id || p["turn"].(float64) != 1 {
		t.Fatalf("prompt: %s", r.body)
	}
	// The user message is stored before the 202.
	if n, _ := ts.store.Length(t.Context(), id); n < 1 {
		t.Fatal("prompt acknowledged before its message was stored")
	}
	ts.waitIdle(id)
	mark := time.Now()
	time.Sleep(2 * time.Millisecond)
	r = ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "again"})
	ts.expect(r, http.StatusAccepted, "")
	if r.json()["turn"].(float64) != 2 {
		t.Fatalf("second prompt: %s", r.body)
	}
	ts.waitIdle(id)
	r = ts.do("GET", "/api/sessions/"+id, nil)
	msgs := r.json()["messages"].([]any)
	want := []string{"user:hello", "assistant:echo: hello", "user:again", "assistant:echo: again"}
	if len(msgs) != len(want) {
		t.Fatalf("messages: %s", r.body)
	}
	var seqs []float64
	for i, m := range msgs {
		m := m.(map[string]any)
		if got := m["role"].(string) + ":" + m["content"].(string); got != want[i] {
			t.Fatalf("message %d is %q, want %q", i, got, want[i])
		}
		seqs = append(seqs, m["seq"].(float64))
	}
	r = ts.do("GET", "/api/sessions/"+id+"/messages?since="+mark.UTC().Format(time.RFC3339Nano), nil)
	if got := r.json()["messages"].([]any); len(got) != 2 || got[0].(map[string]any)["content"] != "again" {
		t.Fatalf("since: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions/"+id+"/messages?afterSeq="+ftoa(seqs[1]), nil)
	if got := r.json()["messages"].([]any); len(got) != 2 || got[0].(map[string]any)["seq"].(float64) != seqs[2] {
		t.Fatalf("afterSeq: %s", r.body)
	}
	r = ts.do("GET", "/api/sessions/"+id+"/messages", nil)
	if got := r.json()["messages"].([]any); len(got) != 4 {
		t.Fatalf("all messages: %s", r.body)
	}
	if r := ts.do("GET", "/api/sessions/"+id, nil).json(); r["turns"].(float64) != 2 || r["messageCount"].(float64) != 4 {
		t.Fatalf("counts: %v", r)
	}
}

// contents returns the content of each message of a session object.
func contents(session map[string]any) []string {
	var out []string
	for _, m := range session["messages"].([]any) {
		c, _ := m.(map[string]any)["content"].(string)
		out = append(out, c)
	}
	return out
}

func ftoa(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(time.Duration(f).String(), "ns"), "")
}

func TestPromptConflicts(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	block := make(chan struct{})
	ag := &fakeAgent{store: store, block: block}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"slow": ag}, MaxRunning: 1, AdmissionWait: 50 * time.Millisecond})
	a, b := ts.create(nil), ts.create(nil)
	// The queue's changes reach the session's event streams.
	var qmu sync.Mutex
	var queueEvents []int64
	defer store.Observe(func(e sessions.Event) {
		if e.Type == eventQueue && e.SessionID == a {
			qmu.Lock()
			queueEvents = append(queueEvents, e.Data["queued"].(int64))
			qmu.Unlock()
		}
	})()
	ts.expect(ts.do("POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	// The session's own running turn: the prompt is queued (before the
	// wait for a slot of --max-running), the ninth waiting one refused.
	for i := range MaxQueued {
		r := ts.do("POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "q" + strconv.Itoa(i+1)})
		ts.expect(r, http.StatusAccepted, "")
		if g := r.json(); g["queued"] != true || g["position"] != float64(i+1) {
			t.Fatalf("queued prompt %d: %s", i+1, r.body)
		}
	}
	ts.expect(ts.do("POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "too many"}), http.StatusConflict, "queue_full")
	// Another session's prompt waits for the slot, and is refused when
	// the wait reaches AdmissionWait.
	r := ts.do("POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "three"})
	ts.expect(r, http.StatusTooManyRequests, "too_many_turns")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if g := ts.do("GET", "/api/sessions/"+a, nil).json(); g["running"] != true || g["queued"] != float64(MaxQueued) {
		t.Fatalf("running, queued: %v", g)
	}
	if l := ts.do("GET", "/api/sessions?limit=1", nil).json()["sessions"].([]any); l[0].(map[string]any)["queued"] != float64(0) {
		t.Fatalf("list: session b queued %v", l[0])
	}
	close(block)
	ts.waitIdle(a)
	if g := ts.do("GET", "/api/sessions/"+a, nil).json(); g["queued"] != float64(0) {
		t.Fatalf("queued after the queue ran: %v", g["queued"])
	}
	qmu.Lock()
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 7, 6, 5, 4, 3, 2, 1, 0}; !slices.Equal(queueEvents, want) {
		t.Errorf("queue events %v, want %v", queueEvents, want)
	}
	qmu.Unlock()
	// The queued prompts ran after the first, in order, each a turn.
	want := []string{"one", "echo: one"}
	for i := range MaxQueued {
		want = append(want, "q"+strconv.Itoa(i+1), "echo: q"+strconv.Itoa(i+1))
	}
	if got := contents(ts.do("GET", "/api/sessions/"+a, nil).json()); !slices.Equal(got, want) {
		t.Fatalf("transcript after queued prompts:\n got %q\nwant %q", got, want)
	}
	ts.expect(ts.do("POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "three"}), http.StatusAccepted, "")
	ts.waitIdle(b)
	ts.expect(ts.do("DELETE", "/api/sessions/"+b, nil), http.StatusOK, "")
	ts.expect(ts.do("POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "four"}), http.StatusConflict, "not_active")
	ts.expect(ts.do("POST", "/api/sessions/nope/prompt", map[string]any{"text": "x"}), http.StatusNotFound, "not_found")
}

func TestCancelTurn(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	ag := &fakeAgent{store: store, block: make(chan struct{})}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"slow": ag}})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/cancel", nil), http.StatusConflict, "no_turn")
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/cancel", nil), http.StatusAccepted, "")
	ts.waitIdle(id)
	g := ts.do("GET", "/api/sessions/"+id, nil).json()
	if g["status"] != "active" || g["messageCount"].(float64) != 1 {
		t.Fatalf("after cancel: %v", g)
	}
	// The session takes prompts again.
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"}), http.StatusAccepted, "")
}

func TestDeleteCancelsAndHeals(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	ag := &fakeAgent{store: store, block: make(chan struct{})}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"slow": ag}})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	// Leave a tool call open, as a turn killed mid-tool would.
	if _, err := store.Apply(t.Context(), id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant,
		ToolCalls: []message.ToolCall{{ID: "c1", Name: "read", Arguments: map[string]any{}}}}}}); err != nil {
		t.Fatal(err)
	}
	r := ts.do("DELETE", "/api/sessions/"+id, nil)
	ts.expect(r, http.StatusOK, "")
	if g := r.json(); g["status"] != "cancelled" || g["running"] != false {
		t.Fatalf("delete: %s", r.body)
	}
	g := ts.do("GET", "/api/sessions/"+id, nil).json()
	msgs := g["messages"].([]any)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,system" {
		t.Fatalf("roles after delete: %v", roles)
	}
	if message.OpenToolCalls(sessionsTranscript(t, store, id)) != nil {
		t.Fatal("open tool calls after delete")
	}
	// Deleting again is harmless; purge deletes.
	ts.expect(ts.do("DELETE", "/api/sessions/"+id, nil), http.StatusOK, "")
	r = ts.do("DELETE", "/api/sessions/"+id+"?purge=true", nil)
	ts.expect(r, http.StatusNoContent, "")
	ts.expect(ts.do("GET", "/api/sessions/"+id, nil), http.StatusNotFound, "not_found")
	ts.expect(ts.do("DELETE", "/api/sessions/"+id+"?purge=true", nil), http.StatusNotFound, "not_found")
}

func sessionsTranscript(t *testing.T, store *sessions.Store, id string) message.Transcript {
	rec, err := store.Snapshot(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return message.NewTranscript(rec.Messages)
}

func TestTurnErrorEndsSession(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	for _, skip := range []bool{false, true} {
		ag := &fakeAgent{store: store, fail: errBoom, skip: skip}
		ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"bad": ag}, MaxSessions: 10})
		id := ts.create(nil)
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hi"}), http.StatusAccepted, "")
		ts.waitIdle(id)
		g := ts.do("GET", "/api/sessions/"+id, nil).json()
		msgs := g["messages"].([]any)
		if g["status"] != "error" || len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "hi" ||
			!strings.Contains(msgs[1].(map[string]any)["content"].(string), "boom") {
			t.Fatalf("skip=%v: after a failed turn: %v", skip, g)
		}
		if h := ts.do("GET", "/healthz", nil).json(); h["activeSessions"].(float64) != 0 {
			t.Fatalf("error session still counted active: %v", h)
		}
		// A new prompt reactivates it (the agent fails again here).
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "again"}), http.StatusAccepted, "")
		ts.waitIdle(id)
		rec, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var reactivated, info bool
		for _, e := range rec.Events {
			reactivated = reactivated || e.Type == sessions.EventStatus && e.Data["previous"] == "error" && e.Data["status"] == "active"
			info = info || e.Type == sessions.EventInfo && e.Data["previous"] == "error"
		}
		if !reactivated || !info || rec.Status != sessions.StatusError || rec.Messages[2].Text != "again" {
			t.Fatalf("skip=%v: no reactivation recorded: %v %v, status %s, %d messages", skip, reactivated, info, rec.Status, len(rec.Messages))
		}
	}
}

func TestIdleCleanup(t *testing.T) {
	dir := t.TempDir()
	_ = dir
	// The idle timeout leaves room for a loaded machine: a prompt, its
	// turn and the pause between prompts must fit in it.
	ts := newTestServer(t, Config{IdleTimeout: 500 * time.Millisecond, MaxSessions: 1})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions", nil), http.StatusTooManyRequests, "too_many_sessions")
	// Activity keeps it alive.
	for range 3 {
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "ping"}), http.StatusAccepted, "")
		ts.waitIdle(id)
		time.Sleep(200 * time.Millisecond)
	}
	if g := ts.do("GET", "/api/sessions/"+id, nil).json(); g["status"] != "active" {
		t.Fatalf("active session reaped: %v", g)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := ts.do("GET", "/api/sessions/"+id, nil).json()
		if g["status"] == "completed" {
			if g["metadata"].(map[string]any)["reason"] != reasonIdle {
				t.Fatalf("idle session: %v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reaped: %v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "late"}), http.StatusConflict, "not_active")
	ts.create(nil) // the active count dropped
}

// TestPromptRacesIdleReaper pins the pieces that close the race between a
// prompt and the idle reaper: a prompt to an idle session whose turn
// lock is held (the reaper completing it) waits for the lock instead of
// queueing, and is refused once the session is completed, never
// accepted and then dropped; a turn registered but refused afterwards
// (the prompt's second status check) is released without a trace.
func TestPromptRacesIdleReaper(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC).UnixNano())
	watch := &lockWatch{MemoryBackend: sessions.NewMemoryBackend(), refused: make(chan struct{})}
	store, err := sessions.NewStore(watch, sessions.WithClock(func() time.Time { return time.Unix(0, now.Load()).UTC() }))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store})
	id := ts.create(nil)

	// The reaper: it holds the lock of the session, idle for an hour.
	lk, err := ts.srv.locks.TryLock(context.Background(), turnLock(id))
	if err != nil {
		t.Fatal(err)
	}
	now.Add(int64(time.Hour))
	watch.watch(turnLock(id))
	reaped := make(chan error, 1)
	go func() {
		// once the prompt has found the lock held, the reaper completes
		// the session and lets the lock go
		<-watch.refused
		err := ts.srv.end(context.Background(), id, sessions.StatusCompleted, reasonIdle, "")
		lk.Unlock(context.Background())
		reaped <- err
	}()
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "now"}), http.StatusConflict, "not_active")
	if err := <-reaped; err != nil {
		t.Fatal(err)
	}

	// The reaper completed the session after the prompt's first status
	// check: the turn registered afterwards is released.
	tr, err := ts.srv.startTurn(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.releaseTurn(id, tr)
	if ts.srv.runningAnywhere(context.Background(), []string{id})[id] {
		t.Fatal("a released turn still counts as running")
	}
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "late"}), http.StatusConflict, "not_active")
	rec, err := ts.store.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Messages); n != 0 {
		t.Fatalf("a completed session got %d messages", n)
	}
}

// TestMessageIDsAndTimes: a message object carries the message's own id
// and time, also for a message a compaction kept (whose seq is the
// compaction's), and ?since= filters by that time.
func TestMessageIDsAndTimes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store})
	id := ts.create(nil)
	ctx := t.Context()
	for i, text := range []string{"one", "two", "three"} {
		now = now.Add(time.Minute)
		if _, err := store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	stored, _ := store.Snapshot(ctx, id)
	now = now.Add(time.Hour) // the compaction keeps "three"
	if _, err := store.Update(ctx, id, func(v message.View) (*sessions.Change, error) {
		return &sessions.Change{Replace: true, ReplaceWith: []message.Message{{Role: message.RoleUser, Text: "[summary]"}, *v.At(2)},
			Events: []sessions.Event{sessions.NewEvent(sessions.EventContextCompacted, map[string]any{"messages_after": int64(2)})}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	msgs := ts.do("GET", "/api/sessions/"+id, nil).json()["messages"].([]any)
	kept := msgs[1].(map[string]any)
	if kept["id"] != stored.Messages[2].ID || kept["createdAt"] != "2026-01-02T03:03:00Z" {
		t.Fatalf("the kept message: %v, want id %s created 03:03", kept, stored.Messages[2].ID)
	}
	if summary := msgs[0].(map[string]any); summary["createdAt"] != "2026-01-02T04:03:00Z" || summary["id"] == "" {
		t.Fatalf("the summary: %v", summary)
	}
	r := ts.do("GET", "/api/sessions/"+id+"/messages?since=2026-01-02T03:30:00Z", nil)
	if got := r.json()["messages"].([]any); len(got) != 1 || got[0].(map[string]any)["content"] != "[summary]" {
		t.Fatalf("since: %s", r.body)
	}
}

// lockWatch is a memory backend whose locks close refused the first time
// a TryLock of the watched name finds it held.
type lockWatch struct {
	*sessions.MemoryBackend
	refused chan struct{}
	once    sync.Once
	mu      sync.Mutex
	name    string
}

func (b *lockWatch) watch(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.name = name
}

func (b *lockWatch) NewLocker(time.Duration) (sessions.Locker, error) {
	return &watchedLocker{Locker: sessions.NewLocalLocker(), b: b}, nil
}

type watchedLocker struct {
	sessions.Locker
	b *lockWatch
}

func (l *watchedLocker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	lk, err := l.Locker.TryLock(ctx, name)
	l.b.mu.Lock()
	watched := name == l.b.name
	l.b.mu.Unlock()
	if watched && errors.Is(err, sessions.ErrLocked) {
		l.b.once.Do(func() { close(l.b.refused) })
	}
	return lk, err
}
