package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseFrame is one parsed Server-Sent Event (or comment).
type sseFrame struct {
	id      string
	data    map[string]any
	comment string
}

// sseStream reads frames from an events stream.
type sseStream struct {
	resp   *http.Response
	frames chan sseFrame
	cancel context.CancelFunc
}

func (ts *testServer) events(id string, lastID string) *sseStream {
	ts.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.http.URL+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := ts.http.Client().Do(req)
	if err != nil {
		cancel()
		ts.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		ts.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{resp: resp, frames: make(chan sseFrame, 10000), cancel: cancel}
	go func() {
		defer close(s.frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				s.frames <- f
				f = sseFrame{}
			case strings.HasPrefix(line, ":"):
				f.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &f.data); err != nil {
					panic(err)
				}
			}
		}
	}()
	ts.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() { s.cancel(); s.resp.Body.Close() }

// next returns the next frame that is an event (skipping comments).
func (s *sseStream) next(t *testing.T) sseFrame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.data != nil {
				return f
			}
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

// waitComment waits for a comment frame with the text.
func (s *sseStream) waitComment(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.comment == text {
				return
			}
		case <-timeout:
			t.Fatalf("no %q comment within 10s", text)
		}
	}
}

func TestEventsResume(t *testing.T) {
	ts := newTestServer(t, Config{Heartbeat: 50 * time.Millisecond})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	ts.waitIdle(id)

	s := ts.events(id, "")
	first := s.next(t)
	if first.id != "1" || first.data["type"] != "message" || first.data["role"] != "user" {
		t.Fatalf("first event: %+v", first)
	}
	s.waitComment(t, "ready")
	// Live: a state and a text_delta without id, then the stored reply.
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"}), http.StatusAccepted, "")
	var live []sseFrame
	for len(live) < 4 {
		live = append(live, s.next(t))
	}
	if live[0].data["role"] != "user" || live[1].data["type"] != "state" || live[1].data["state"] != "llm_generating" || live[1].id != "" ||
		live[2].data["type"] != "text_delta" || live[2].id != "" || live[3].data["role"] != "assistant" {
		t.Fatalf("live events: %+v", live)
	}
	s.waitComment(t, "heartbeat")
	s.close()

	// Resume after event 2: exactly the stored events 3.. once each.
	ts.waitIdle(id)
	rec, _ := ts.store.Snapshot(t.Context(), id)
	last := rec.Events[len(rec.Events)-1].Seq
	r := ts.events(id, "2")
	for want := int64(3); want <= last; want++ {
		f := r.next(t)
		if f.id != strconv.FormatInt(want, 10) || f.data["seq"].(float64) != float64(want) {
			t.Fatalf("resumed event %d: %+v", want, f)
		}
	}
	r.waitComment(t, "ready")
}

// TestSlowClientDropped: a client that does not read is disconnected
// when its buffer fills, and turns never wait for it.
func TestSlowClientDropped(t *testing.T) {
	ts := newTestServer(t, Config{SSEBuffer: 4, MaxSessions: 100})
	id := ts.create(nil)
	// Subscribe directly (an HTTP client's socket buffers would hide the
	// slowness): nobody reads this client.
	c := ts.srv.hub.subscribe(id)
	done := make(chan struct{})
	go func() {
		for i := range 20 {
			ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "p" + strconv.Itoa(i)}), http.StatusAccepted, "")
			ts.waitIdle(id)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("turns blocked by a slow SSE client")
	}
	select {
	case <-c.gone:
	default:
		t.Fatal("slow client not dropped")
	}
	if n, _ := ts.store.Length(t.Context(), id); n != 40 {
		t.Fatalf("%d messages, want 40", n)
	}
}

// TestEventsNoGapUnderLoad: a stream opened while turns run, then
// resumed after a disconnect, delivers every stored event once.
func TestEventsNoGapUnderLoad(t *testing.T) {
	ts := newTestServer(t, Config{SSEBuffer: 8})
	id := ts.create(nil)
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for i := range 30 {
			ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "p" + strconv.Itoa(i)})
			ts.waitIdle(id)
		}
	}()
	seen := map[int64]bool{}
	last := ""
	for {
		s := ts.events(id, last)
		ended := false
		for !ended {
			select {
			case f, ok := <-s.frames:
				if !ok {
					ended = true // dropped or closed: resume
					break
				}
				if f.id == "" {
					continue
				}
				n, _ := strconv.ParseInt(f.id, 10, 64)
				if seen[n] {
					t.Fatalf("event %d delivered twice", n)
				}
				seen[n] = true
				last = f.id
			case <-stop:
				ended = true
			}
		}
		s.close()
		select {
		case <-stop:
			s := ts.events(id, last)
			s.waitForReady(t, seen)
			rec, _ := ts.store.Snapshot(t.Context(), id)
			for _, e := range rec.Events {
				if !seen[e.Seq] {
					t.Fatalf("event %d never delivered", e.Seq)
				}
			}
			return
		default:
		}
	}
}

// waitForReady records the ids of the events before the ready comment.
func (s *sseStream) waitForReady(t *testing.T, seen map[int64]bool) {
	t.Helper()
	for f := range s.frames {
		if f.comment == "ready" {
			return
		}
		if n, err := strconv.ParseInt(f.id, 10, 64); err == nil {
			if seen[n] {
				t.Fatalf("event %d delivered twice", n)
			}
			seen[n] = true
		}
	}
	t.Fatal("stream ended before ready")
}
