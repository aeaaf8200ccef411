package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/export"
	"github.com/skein-dev/skein/sessions/message"
)

// promptAgent is an agent whose prompts steer the mock: "slow ..." waits
// for its reply until cancelled, "wait ..." for a moment, "queue A,B"
// queues replies A and B for its session; every prompt then runs an
// agent loop.
const promptAgent = `
def handle(session_id, text):
    if text.startswith("slow"):
        llm_mock(text = "slow reply", delay_ms = 600000)
    elif text.startswith("wait"):
        llm_mock(text = "waited: " + text, delay_ms = 300)
    elif text.startswith("queue "):
        for r in text[len("queue "):].split(","):
            llm_mock(text = r)
    agent_loop(text, session_id = session_id)
`

// texts returns the role and content of each message of a session
// object, as "role: content".
func texts(s map[string]any) []string {
	var out []string
	for _, m := range s["messages"].([]any) {
		m := m.(map[string]any)
		c, _ := m["content"].(string)
		out = append(out, fmt.Sprint(m["role"], ": ", c))
	}
	return out
}

// TestQueuedPromptsRunInOrder: two prompts sent during a running turn
// are answered 202 queued with their positions and both run after it, in
// order, each a turn of its own; nothing is lost.
func TestQueuedPromptsRunInOrder(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, promptAgent, 5)
	id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	logEventsOnFailure(t, store, id)
	first := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "wait one"}, 202)
	if first["queued"] != false || first["turn"] != float64(1) {
		t.Fatalf("first prompt: %v", first)
	}
	for i, text := range []string{"second", "third"} {
		r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": text}, 202)
		if r["queued"] != true || r["position"] != float64(i+1) {
			t.Fatalf("prompt %q during the turn: %v", text, r)
		}
	}
	s := waitTurn(t, hs, id)
	want := []string{"user: wait one", "assistant: waited: wait one",
		"user: second", "assistant: Mock response to 1-word prompt: second",
		"user: third", "assistant: Mock response to 1-word prompt: third"}
	if got := texts(s); strings.Join(got, "\n") != strings.Join(want, "\n") || s["turns"] != float64(3) || s["status"] != "active" {
		t.Fatalf("after the queued prompts (%v, %v turns):\n%s", s["status"], s["turns"], strings.Join(got, "\n"))
	}
}

// TestServedSessionHasNoDefaultCap: without --max-turns, a served
// session takes 200 prompts (the VM's default cap of 50 does not apply).
func TestServedSessionHasNoDefaultCap(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, promptAgent, 5)
	id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	for i := range 200 {
		r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": fmt.Sprint("p", i)}, 202)
		if r["queued"] == true {
			waitTurn(t, hs, id)
		}
	}
	s := waitTurn(t, hs, id)
	if s["status"] != "active" || s["turns"] != float64(200) || len(s["messages"].([]any)) != 400 {
		t.Fatalf("after 200 prompts: %v, %v turns, %d messages", s["status"], s["turns"], len(s["messages"].([]any)))
	}
}

// TestTurnCapRefusesUpFront: with a cap (the server's MaxTurns, or one
// the agent's loop is given), the prompt past it gets 409 turn_limit,
// nothing is stored, and the session stays active, readable and
// completable.
func TestTurnCapRefusesUpFront(t *testing.T) {
	for name, c := range map[string]struct {
		source string
		cap    int
	}{
		"server cap": {promptAgent, 3},
		"agent cap":  {"def handle(session_id, text):\n    agent_loop(text, session_id = session_id, max_turns = 3)\n", 0},
	} {
		t.Run(name, func(t *testing.T) {
			store, _ := sessions.NewStore(sessions.NewMemoryBackend())
			_, hs := starlarkServer(t, store, c.source, 5, func(cfg *serve.Config) { cfg.MaxTurns = c.cap })
			id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
			for i := range 3 {
				call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": fmt.Sprint("p", i)}, 202)
				waitTurn(t, hs, id)
			}
			r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one too many"}, 409)
			if e := r["error"].(map[string]any); e["code"] != "turn_limit" || !strings.Contains(e["message"].(string), "3 turns") {
				t.Fatalf("prompt past the cap: %v", r)
			}
			s := waitTurn(t, hs, id)
			// The server refuses before the agent runs, the agent's loop
			// when it starts: either way the refusal is a turn_limit
			// event and the turn's end, session:turn_completed with
			// error.code turn_limit, and nothing else.
			rec, _ := store.Snapshot(context.Background(), id)
			n := len(rec.Events)
			if last := rec.Events[n-2].Type + " " + rec.Events[n-1].Type; last != "turn_limit session:turn_completed" {
				t.Fatalf("last events %s", last)
			}
			if d := rec.Events[n-2].Data; d["max_turns"] != int64(3) || d["turns"] != int64(3) {
				t.Errorf("turn_limit %v", d)
			}
			ended := rec.Events[n-1].Data
			if e, _ := ended["error"].(map[string]any); ended["stopReason"] != "error" || e["code"] != "turn_limit" || !strings.Contains(fmt.Sprint(e["message"]), "turn cap of 3") {
				t.Errorf("session:turn_completed %v", ended)
			}
			if prev := rec.Events[n-3].Type; prev != "session:turn_completed" {
				t.Errorf("the refusal follows %s, not the third turn's end", prev)
			}
			// the session exports
			var buf bytes.Buffer
			if err := export.WriteJSON(&buf, rec); err != nil {
				t.Fatal(err)
			}
			if _, _, err := export.ReadExport(&buf); err != nil {
				t.Fatalf("export of the refused session: %v", err)
			}
			if s["status"] != "active" || len(s["messages"].([]any)) != 6 {
				t.Fatalf("after the refused prompt: %v, %d messages", s["status"], len(s["messages"].([]any)))
			}
			done := call(t, hs, "POST", "/api/sessions/"+id+"/complete", nil, 200)
			if done["status"] != "completed" || done["metadata"].(map[string]any)["reason"] != "completed_by_user" {
				t.Fatalf("complete: %v", done)
			}
		})
	}
}

// TestQueuedPromptPastTheCap: a prompt queued behind a running turn that
// the cap would refuse before it ran gets 409 turn_limit at once, logged
// as the turn's end (session:turn_completed, error.code turn_limit).
func TestQueuedPromptPastTheCap(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, promptAgent, 5, func(cfg *serve.Config) { cfg.MaxTurns = 2 })
	id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	// The cancel below must reach the slow turn inside its model call:
	// cancelled before, it would leave its 600-second mock reply to the
	// session's next prompt (queued "two"), which would then wait for it.
	generating := make(chan struct{})
	var once sync.Once
	defer store.Observe(func(e sessions.Event) {
		if e.SessionID == id && e.Type == "session_state" && e.Data["state"] == "llm_generating" {
			once.Do(func() { close(generating) })
		}
	})()
	call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "slow one"}, 202)
	if r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"}, 202); r["queued"] != true {
		t.Fatalf("second prompt: %v", r)
	}
	r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "three"}, 409)
	if e := r["error"].(map[string]any); e["code"] != "turn_limit" {
		t.Fatalf("third prompt: %v", r)
	}
	rec, _ := store.Snapshot(context.Background(), id)
	var refusal []string
	for _, e := range rec.Events {
		if e.Type == "turn_limit" || e.Type == "session:turn_completed" {
			refusal = append(refusal, fmt.Sprint(e.Type, " ", e.Data["max_turns"], " ", e.Data["error"]))
		}
	}
	if got := strings.Join(refusal, "; "); got != "turn_limit 2 <nil>; session:turn_completed <nil> map[code:turn_limit message:session '"+id+"' reached its turn cap of 2 (turn_limit)]" {
		t.Fatalf("refusal events: %s", got)
	}
	<-generating
	call(t, hs, "POST", "/api/sessions/"+id+"/cancel", nil, 202)
	if s := waitTurn(t, hs, id); s["status"] != "active" {
		t.Fatalf("after the cancel: %v", s["status"])
	}
}

// TestSessionMockQueues: replies an agent queues with llm_mock answer
// its own session only; those a prompt left wait for the session's next
// prompt.
func TestSessionMockQueues(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, promptAgent, 5)
	a := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	b := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	call(t, hs, "POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "queue A1,A2"}, 202)
	waitTurn(t, hs, a)
	call(t, hs, "POST", "/api/sessions/"+b+"/prompt", map[string]any{"text": "hello"}, 202)
	sb := waitTurn(t, hs, b)
	call(t, hs, "POST", "/api/sessions/"+a+"/prompt", map[string]any{"text": "next"}, 202)
	sa := waitTurn(t, hs, a)
	if got := texts(sb); got[1] != "assistant: Mock response to 1-word prompt: hello" {
		t.Fatalf("session b got another session's reply: %q", got)
	}
	if got := texts(sa); got[1] != "assistant: A1" || got[3] != "assistant: A2" {
		t.Fatalf("session a's replies: %q", got)
	}
}

// TestDeleteDuringTurnRecordsCancellation: a DELETE while a turn runs
// always writes the cancellation record (system message,
// metadata.reason, status event, log line), whichever side sets the
// status first; 50 times.
func TestDeleteDuringTurnRecordsCancellation(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(1000))
	var logs syncBuffer
	_, hs := starlarkServer(t, store, promptAgent, 100, func(cfg *serve.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for i := range 50 {
		id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
		call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "slow"}, 202)
		if i%2 == 1 {
			// Let the turn reach its model call.
			time.Sleep(time.Millisecond)
		}
		del := call(t, hs, "DELETE", "/api/sessions/"+id, nil, 200)
		if del["status"] != "cancelled" || del["metadata"].(map[string]any)["reason"] != "cancelled" {
			t.Fatalf("run %d: delete answered %v", i, del)
		}
		rec, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		notes, statuses := 0, 0
		for _, m := range rec.Messages {
			if m.Role == message.RoleSystem && m.Text == "Session cancelled by request." {
				notes++
			}
		}
		for _, e := range rec.Events {
			if e.Type == sessions.EventStatus && e.Data["reason"] == "cancelled" {
				statuses++
			}
		}
		if notes != 1 || statuses != 1 || rec.Status != sessions.StatusCancelled {
			t.Fatalf("run %d: %d cancellation messages, %d status events, status %s", i, notes, statuses, rec.Status)
		}
		if !strings.Contains(logs.String(), "id="+id+" reason=cancelled") {
			t.Fatalf("run %d: no log line for the cancellation of %s:\n%s", i, id, logs.String())
		}
		// A second delete changes nothing.
		call(t, hs, "DELETE", "/api/sessions/"+id, nil, 200)
		if rec2, _ := store.Snapshot(context.Background(), id); len(rec2.Messages) != len(rec.Messages) {
			t.Fatalf("run %d: a second delete wrote again", i)
		}
	}
}

// TestCompleteWaitsForTheTurn: complete lets the running turn finish,
// drops queued prompts (saying so), and ends the session completed;
// prompts are then refused and a second complete answers the same.
func TestCompleteWaitsForTheTurn(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, promptAgent, 5)
	id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "wait for it"}, 202)
	call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "queued"}, 202)
	s := call(t, hs, "POST", "/api/sessions/"+id+"/complete", nil, 200)
	if s["status"] != "completed" || s["running"] != false || s["metadata"].(map[string]any)["reason"] != "completed_by_user" {
		t.Fatalf("complete answered %v", s)
	}
	s = call(t, hs, "GET", "/api/sessions/"+id, nil, 200)
	got := texts(s)
	if s["status"] != "completed" || len(got) != 3 || got[1] != "assistant: waited: wait for it" ||
		got[2] != "system: Session completed by request. 1 queued prompt was not run." {
		t.Fatalf("complete: %v\n%s", s["status"], strings.Join(got, "\n"))
	}
	r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "late"}, 409)
	if r["error"].(map[string]any)["code"] != "not_active" {
		t.Fatalf("prompt after complete: %v", r)
	}
	again := call(t, hs, "POST", "/api/sessions/"+id+"/complete", nil, 200)
	if again["messageCount"] != float64(3) || again["status"] != "completed" {
		t.Fatalf("second complete: %v", again)
	}
	other := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	call(t, hs, "DELETE", "/api/sessions/"+other, nil, 200)
	if r := call(t, hs, "POST", "/api/sessions/"+other+"/complete", nil, 409); r["error"].(map[string]any)["code"] != "not_active" {
		t.Fatalf("complete of a cancelled session: %v", r)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
