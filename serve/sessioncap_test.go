package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// capAgent makes sessions inside its turns: "fork" forks its own session,
// "open ID" opens session ID, "loop ID" runs an agent loop on session ID.
const capAgent = `
def handle(session_id, text):
    if text == "fork":
        agent_session_fork(session_id)
    elif text.startswith("open "):
        agent_session_open(text[len("open "):])
    elif text.startswith("loop "):
        agent_loop("hi", session_id = text[len("loop "):])
`

// TestMemoryStoreCapInsideTurns: on a memory store, a session made inside
// a turn (a fork, a session the script opens, an agent loop's new
// session) past --session-cap is refused like one created through the
// API: the builtin fails, naming itself and the cap, nothing of it is
// written, and no other session is pushed out and lost (before, the least
// recently used session, another client's, was dropped and then answered
// 404).
func TestMemoryStoreCapInsideTurns(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(3))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := starlarkServer(t, store, capAgent, 5)
	a := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	b := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	call(t, hs, "POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "fork"}, 202)
	s := waitTurn(t, hs, a)
	if s["status"] != "active" || s["childCount"] != float64(1) {
		t.Fatalf("the first fork (the third session): %v, %v children", s["status"], s["childCount"])
	}
	events := func(id string) int {
		rec, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return len(rec.Events)
	}
	for _, c := range []struct{ prompt, builtin string }{
		{"fork", "agent_session_fork"},
		{"open extra", "agent_session_open"},
		{"loop extra", "agent_loop"},
	} {
		call(t, hs, "POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": c.prompt}, 202)
		s := waitTurn(t, hs, a)
		msgs := texts(s)
		last := msgs[len(msgs)-1]
		if s["status"] != "error" || !strings.HasPrefix(last, "system: The turn failed: ") ||
			!strings.Contains(last, "Error: "+c.builtin+": session '") ||
			!strings.Contains(last, "': the store is full: the memory store already holds 3 sessions, its cap (--session-cap)") || s["childCount"] != float64(1) {
			t.Fatalf("%q past the cap: %v, %v children, last message %q", c.prompt, s["status"], s["childCount"], last)
		}
		call(t, hs, "GET", "/api/sessions/extra", nil, 404)
		// the other client's session is still there, untouched
		if s := call(t, hs, "GET", "/api/sessions/"+b, nil, 200); s["status"] != "active" || events(b) != 1 {
			t.Fatalf("session b: %v, %d events", s["status"], events(b))
		}
	}
	call(t, hs, "POST", "/api/sessions", nil, 429)
}
