package serve

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// waitFor polls cond until it holds, failing t after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitingPrompts is how many prompts wait for a turn slot.
func (s *Server) waitingPrompts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// TestPromptWaitsForASlot: with --max-running 1 and a turn running, the
// prompts of other sessions wait for the slot instead of getting 429,
// and run first come first served as turns end; past MaxSessions waiting
// prompts, one more is refused at once; a shutdown refuses the waiting
// ones with 503.
func TestPromptWaitsForASlot(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	block := make(chan struct{})
	ag := &fakeAgent{store: store, block: block}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"slow": ag}, MaxRunning: 1, MaxSessions: 3})
	a, b, c := ts.create(nil), ts.create(nil), ts.create(nil)
	var omu sync.Mutex
	var order []string // the sessions of the user messages stored, in order
	defer store.Observe(func(e sessions.Event) {
		if e.Type == sessions.EventMessage && e.Data["role"] == "user" {
			omu.Lock()
			order = append(order, e.SessionID)
			omu.Unlock()
		}
	})()
	ts.expect(ts.do("POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "a"}), http.StatusAccepted, "")
	answers := make(chan string, 3)
	for i, id := range []string{b, c} {
		go func() {
			r := ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": id})
			if r.status != http.StatusAccepted {
				t.Errorf("prompt %d: %d %s", i, r.status, r.body)
			}
			answers <- id
		}()
		waitFor(t, "a waiting prompt", func() bool { return ts.srv.waitingPrompts() == i+1 })
	}
	// A second prompt to c waits too (c has no turn yet): three wait,
	// MaxSessions; a fourth is refused at once.
	go func() {
		r := ts.do("POST", "/api/sessions/"+c+"/prompt", map[string]any{"text": "c2"})
		if r.status != http.StatusAccepted {
			t.Errorf("second prompt of c: %d %s", r.status, r.body)
		}
		answers <- "c2"
	}()
	waitFor(t, "three waiting prompts", func() bool { return ts.srv.waitingPrompts() == 3 })
	r := ts.do("POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "b2"})
	ts.expect(r, http.StatusTooManyRequests, "too_many_turns")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if m := string(ts.do("GET", "/metrics", nil).body); !containsLine(m, "skein_turns_waiting 3") {
		t.Errorf("metrics: no skein_turns_waiting 3")
	}
	select {
	case id := <-answers:
		t.Fatalf("prompt of %s answered while the slot is taken", id)
	case <-time.After(50 * time.Millisecond):
	}
	// Each turn ends at once now: the waiting prompts run in the order
	// they came (c's second after c's first: a turn of its own, or queued
	// behind it when it found c's turn running).
	close(block)
	for range 3 {
		select {
		case <-answers:
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting prompt was not answered")
		}
	}
	for _, id := range []string{a, b, c} {
		ts.waitIdle(id)
	}
	if want := []string{c, "echo: " + c, "c2", "echo: c2"}; !slices.Equal(contents(ts.do("GET", "/api/sessions/"+c, nil).json()), want) {
		t.Fatalf("session c: %q, want %q", contents(ts.do("GET", "/api/sessions/"+c, nil).json()), want)
	}
	omu.Lock()
	if want := []string{a, b, c, c}; !slices.Equal(order, want) {
		t.Errorf("prompts stored for sessions %q, want %q", order, want)
	}
	omu.Unlock()
	if ts.srv.waitingPrompts() != 0 {
		t.Fatal("prompts still waiting")
	}
}

// TestShutdownRefusesWaitingPrompts: a prompt waiting for a turn slot
// gets 503 when the server shuts down, and nothing of it is stored.
func TestShutdownRefusesWaitingPrompts(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	block := make(chan struct{})
	ag := &fakeAgent{store: store, block: block}
	ts := newTestServer(t, Config{Store: store, Agents: map[string]Agent{"slow": ag}, MaxRunning: 1})
	a, b := ts.create(nil), ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "a"}), http.StatusAccepted, "")
	answer := make(chan *response, 1)
	go func() { answer <- ts.do("POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "b"}) }()
	waitFor(t, "a waiting prompt", func() bool { return ts.srv.waitingPrompts() == 1 })
	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(context.Background()) }()
	ts.expect(<-answer, http.StatusServiceUnavailable, "shutting_down")
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec, err := store.Snapshot(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Messages) != 0 {
		t.Fatalf("session b holds %d messages", len(rec.Messages))
	}
}

// containsLine reports whether text has a line equal to line.
func containsLine(text, line string) bool {
	return slices.Contains(strings.Split(text, "\n"), line)
}
