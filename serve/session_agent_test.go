package serve

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// sessionAgent is a SessionAgent in pure Go: a fakeAgent that records
// the sessions opened and closed, and fails to open when failOpen is set.
type sessionAgent struct {
	fakeAgent
	failOpen error
	mu       sync.Mutex
	opened   []string
	closed   []string
}

func (a *sessionAgent) Open(ctx context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failOpen != nil {
		return a.failOpen
	}
	a.opened = append(a.opened, id)
	return nil
}

func (a *sessionAgent) Close(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = append(a.closed, id)
}

func (a *sessionAgent) isClosed(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.closed, id)
}

// TestSessionAgentLifecycle opens a SessionAgent's session on create
// and closes it whenever the session ends: DELETE, a failed turn, the
// idle reaper, a purge; a failed open fails the create with 502 and
// leaves the session in error; AgentFailed ends an idle session in
// error with the cause.
func TestSessionAgentLifecycle(t *testing.T) {
	ts := newTestServer(t, Config{IdleTimeout: time.Hour, MaxSessions: 100})
	ag := &sessionAgent{fakeAgent: fakeAgent{store: ts.store}}
	ts.srv.cfg.Agents = map[string]Agent{"ext": ag}

	deleted := ts.create(map[string]any{"agent": "ext"})
	if !slices.Contains(ag.opened, deleted) {
		t.Fatalf("create did not open the session: %v", ag.opened)
	}
	ts.expect(ts.do("DELETE", "/api/sessions/"+deleted, nil), http.StatusOK, "")
	if !ag.isClosed(deleted) {
		t.Errorf("DELETE did not close the agent's session")
	}

	purged := ts.create(map[string]any{"agent": "ext"})
	ts.expect(ts.do("DELETE", "/api/sessions/"+purged+"?purge=true", nil), http.StatusNoContent, "")
	if !ag.isClosed(purged) {
		t.Errorf("a purge did not close the agent's session")
	}

	failing := ts.create(map[string]any{"agent": "ext"})
	ag.fakeAgent.fail = errors.New("the agent process exited with status 1")
	ts.expect(ts.do("POST", "/api/sessions/"+failing+"/prompt", map[string]any{"text": "hi"}), http.StatusAccepted, "")
	ts.waitIdle(failing)
	ag.fakeAgent.fail = nil
	if g := ts.do("GET", "/api/sessions/"+failing, nil).json(); g["status"] != "error" || !ag.isClosed(failing) {
		t.Errorf("a failed turn: status %v, closed %v", g["status"], ag.isClosed(failing))
	}

	crashed := ts.create(map[string]any{"agent": "ext"})
	ts.srv.AgentFailed(crashed, errors.New("agent x: the agent process ended: signal: killed"))
	g := ts.do("GET", "/api/sessions/"+crashed, nil).json()
	msgs := g["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)["content"].(string)
	if g["status"] != "error" || !strings.Contains(last, "The agent failed: agent x: the agent process ended: signal: killed") || !ag.isClosed(crashed) {
		t.Errorf("AgentFailed: status %v, last message %q, closed %v", g["status"], last, ag.isClosed(crashed))
	}
	ts.srv.AgentFailed(crashed, errors.New("again")) // not active: nothing changes
	if n := len(ts.do("GET", "/api/sessions/"+crashed, nil).json()["messages"].([]any)); n != len(msgs) {
		t.Errorf("AgentFailed of an ended session wrote %d messages", n-len(msgs))
	}

	ag.failOpen = errors.New("starting gemini: executable file not found")
	r := ts.do("POST", "/api/sessions", map[string]any{"agent": "ext", "id": "never"})
	ts.expect(r, http.StatusBadGateway, "agent_failed")
	if !strings.Contains(string(r.body), "starting gemini: executable file not found") {
		t.Errorf("502 body %s", r.body)
	}
	if g := ts.do("GET", "/api/sessions/never", nil).json(); g["status"] != "error" {
		t.Errorf("a session whose agent failed to open is %v", g["status"])
	}
}

// TestSessionAgentIdle closes an agent's session reaped as idle.
func TestSessionAgentIdle(t *testing.T) {
	ts := newTestServer(t, Config{IdleTimeout: 200 * time.Millisecond})
	ag := &sessionAgent{fakeAgent: fakeAgent{store: ts.store}}
	ts.srv.cfg.Agents = map[string]Agent{"ext": ag}
	id := ts.create(map[string]any{"agent": "ext"})
	deadline := time.Now().Add(10 * time.Second)
	for !ag.isClosed(id) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle session was not closed: %v", ts.do("GET", "/api/sessions/"+id, nil).json()["status"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
