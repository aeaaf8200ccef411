package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/serve/servetest"
)

// events opens the session's SSE stream after lastID and sends its
// stored events (text_delta frames carry no id and are skipped); the
// channel closes when the stream ends. The stream ends with the test.
func (p *serveProcess) events(id, lastID string) <-chan servetest.Event {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer tok")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("events: %d", resp.StatusCode)
	}
	out := make(chan servetest.Event, 1000)
	ready := make(chan struct{})
	go func() {
		defer close(out)
		defer resp.Body.Close()
		if err := servetest.ScanEvents(resp.Body, ready, func(e servetest.Event) { out <- e }); err != nil {
			p.t.Errorf("session %s: %v", id, err)
		}
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		p.t.Fatal("the stream did not start")
	}
	return out
}

// collect reads events from c until one satisfies stop, failing after a
// minute; it checks that seqs follow each other from after on.
func collect(t *testing.T, c <-chan servetest.Event, after int64, stop func(servetest.Event) bool) []servetest.Event {
	t.Helper()
	var got []servetest.Event
	timeout := time.After(time.Minute)
	for {
		select {
		case e, ok := <-c:
			if !ok {
				t.Fatalf("the stream ended after %v", got)
			}
			if e.Seq != after+1 {
				t.Fatalf("event seq %d after %d: a gap or a duplicate (%v)", e.Seq, after, got)
			}
			after = e.Seq
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-timeout:
			t.Fatalf("no closing event within a minute: %v", got)
		}
	}
}

// waitRunning waits until the session's running flag, as p sees it, is
// want.
func (p *serveProcess) waitRunning(id string, want bool) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := p.call("GET", "/api/sessions/"+id, "", 200)
		if s["running"] == want {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("session %s: running is not %v after a minute", id, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeReplicas runs two skein serve processes on one session
// database (an SQLite file; a PostgreSQL schema): an SSE stream on one
// sees the events of a turn that runs on the other, and resumes there
// with Last-Event-ID; a second turn is refused across them; the
// active-session limit counts both; a replica killed mid-turn releases
// its turn and the other heals the session and runs its next turn.
func TestServeReplicas(t *testing.T) {
	forEachDurableStore(t, func(t *testing.T, newStore func(t *testing.T) durableStore) {
		testServeReplicas(t, newStore(t).target)
	})
}

func testServeReplicas(t *testing.T, store string) {
	dir := t.TempDir()
	args := []string{"--store", store, "--max-sessions", "2", "--poll-interval", "50ms"}
	p := startServe(t, dir, args...)
	q := startServe(t, dir, args...)

	p.call("POST", "/api/sessions", `{"id": "s"}`, 201)
	q.call("POST", "/api/sessions", `{"id": "t"}`, 201)
	p.call("POST", "/api/sessions", `{}`, 429)
	q.call("POST", "/api/sessions", `{}`, 429)

	// A turn on p, streamed on q.
	stream := q.events("s", "")
	p.call("POST", "/api/sessions/s/prompt", `{"text": "0.1"}`, 202)
	n := 0
	got := collect(t, stream, 0, func(e servetest.Event) bool {
		if e.Type == "message" {
			n++
		}
		return n == 4
	})
	var msgs []string
	for _, e := range got {
		if e.Type == "message" {
			msgs = append(msgs, e.Role)
		}
	}
	if strings.Join(msgs, ",") != "user,assistant,tool,assistant" {
		t.Fatalf("messages streamed on q: %v", got)
	}
	last := got[len(got)-1].Seq
	p.waitRunning("s", false)

	// A turn on q, resumed on p from q's last event; a prompt to p while
	// it runs waits in p's queue.
	resumed := p.events("s", strconv.FormatInt(last, 10))
	q.call("POST", "/api/sessions/s/prompt", `{"text": "60"}`, 202)
	p.waitToolCall("s")
	if r := p.call("POST", "/api/sessions/s/prompt", `{"text": "0"}`, 202); r["queued"] != true {
		t.Fatalf("prompt to p during q's turn: %v", r)
	}
	collect(t, resumed, last, func(e servetest.Event) bool { return e.Type == "message" && e.Role == "assistant" })

	// Kill q mid-turn: p heals the session (the repair holds the turn
	// lock), then runs the queued prompt.
	q.cmd.Process.Signal(syscall.SIGKILL)
	<-q.done
	const want = "user,assistant,tool,assistant,user,assistant,tool!,user,assistant,tool,assistant"
	s := p.call("GET", "/api/sessions/s", "", 200)
	deadline := time.Now().Add(time.Minute)
	for s["running"] != false || roles(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("after q was killed: %s running=%v %s", s["status"], s["running"], roles(s))
		}
		time.Sleep(20 * time.Millisecond)
		s = p.call("GET", "/api/sessions/s", "", 200)
	}
	if s["status"] != "active" {
		t.Fatalf("status %v after the kill", s["status"])
	}
}
