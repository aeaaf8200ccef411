package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/vm"
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
	// the session's first event: it started, served by agent echo
	if started := s.next(t); started.id != "1" || started.data["type"] != "session:started" || started.data["agent"] != "echo" {
		t.Fatalf("first event: %+v", started)
	}
	first := s.next(t)
	if first.id != "2" || first.data["type"] != "message" || first.data["role"] != "user" {
		t.Fatalf("second event: %+v", first)
	}
	s.waitComment(t, "ready")
	// Live: a state and a text_delta without id, then the stored reply.
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"}), http.StatusAccepted, "")
	var live []sseFrame
	for len(live) < 4 {
		live = append(live, s.next(t))
	}
	if live[0].data["role"] != "user" || live[1].data["type"] != "session_state" || live[1].data["state"] != "llm_generating" || live[1].id != "" ||
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

// TestChildStateOnTheParentsStream: a sub-agent's states reach its
// parent's stream as child_state events (seed 004's payload: the state,
// child_id, the tool when one runs), beside the parent's own
// session_state events; none is stored.
func TestChildStateOnTheParentsStream(t *testing.T) {
	src := `
def lookup():
    return "42"

def delegate():
    return agent_spawn("look it up", tools = [lookup])["output"]

def handle(session_id, text):
    llm_mock(tool_calls = [{"name": "delegate"}])  # the parent delegates
    llm_mock(tool_calls = [{"name": "lookup"}])    # the child calls its tool
    agent_loop(text, session_id = session_id, tools = [delegate])
`
	ts := starlarkTestServer(t, "spawner", src)
	id := ts.create(map[string]any{"agent": "spawner"})
	s := ts.events(id, "")
	s.waitComment(t, "ready")
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "go"}), http.StatusAccepted, "")
	var own, child []string
	childID := ""
	for {
		f := s.next(t)
		switch f.data["type"] {
		case "session_state":
			own = append(own, fmt.Sprint(f.data["state"], "/", f.data["tool"]))
		case "child_state":
			if f.id != "" || f.data["session_id"] != id {
				t.Fatalf("child_state frame %+v: want no id and the parent's session_id", f)
			}
			if childID == "" {
				childID, _ = f.data["child_id"].(string)
			}
			if f.data["child_id"] != childID || childID == "" || childID == id {
				t.Fatalf("child_state frame %+v: child_id", f)
			}
			child = append(child, fmt.Sprint(f.data["state"], "/", f.data["tool"]))
		}
		if f.data["type"] == "session_state" && f.data["state"] == "idle" {
			break
		}
	}
	if got := strings.Join(own, " "); got != "llm_generating/<nil> tool_executing/delegate llm_generating/<nil> idle/<nil>" {
		t.Fatalf("the parent's session_state events: %s", got)
	}
	if got := strings.Join(child, " "); got != "llm_generating/<nil> tool_executing/lookup llm_generating/<nil> idle/<nil>" {
		t.Fatalf("child_state events: %s", got)
	}
	ts.waitIdle(id)
	rec, _ := ts.store.Snapshot(t.Context(), id)
	for _, e := range rec.Events {
		if e.Type == "child_state" || e.Type == "session_state" {
			t.Fatalf("stored %s event", e.Type)
		}
	}
	// the child is the session the parent's subagent_start names
	meta, err := ts.store.Meta(t.Context(), childID)
	if err != nil || meta.ParentID != id {
		t.Fatalf("child %q: parent %v (%v)", childID, meta, err)
	}
}

// TestMessageEventsCarryTheMessage: on the stream, every "message" event
// carries the message it appended, as GET .../messages gives it: in the
// history (also a message a trim dropped since, from the store's history)
// and live.
func TestMessageEventsCarryTheMessage(t *testing.T) {
	be, err := sqlite.Open(filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	store, err := sessions.NewStore(be)
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Store: store})
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	ts.waitIdle(id)
	// drop the first message: its event still carries it
	if _, err := store.Apply(t.Context(), id, &sessions.Change{DropFirst: 1, Events: []sessions.Event{sessions.NewEvent(sessions.EventTrim, nil)}}); err != nil {
		t.Fatal(err)
	}
	r := ts.do("GET", "/api/sessions/"+id+"/messages", nil)
	ts.expect(r, http.StatusOK, "")
	listed := r.json()["messages"].([]any)
	check := func(f sseFrame, text string) {
		t.Helper()
		m, _ := f.data["message"].(map[string]any)
		seq, _ := strconv.ParseInt(f.id, 10, 64)
		if m == nil || m["role"] != f.data["role"] || m["content"] != text || m["seq"] != float64(seq) || m["id"] == "" || m["createdAt"] == nil {
			t.Fatalf("message event %+v: want its message %q", f, text)
		}
	}
	s := ts.events(id, "")
	if f := s.next(t); f.data["type"] != "session:started" {
		t.Fatalf("first event %+v", f)
	}
	check(s.next(t), "one")
	second := s.next(t)
	check(second, "echo: one")
	if !reflect.DeepEqual(second.data["message"], listed[0]) {
		t.Fatalf("the event's message %v, the listed one %v", second.data["message"], listed[0])
	}
	s.waitComment(t, "ready")
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"}), http.StatusAccepted, "")
	for _, want := range []string{"two", "echo: two"} {
		f := s.next(t)
		for f.data["type"] != "message" {
			f = s.next(t)
		}
		check(f, want)
	}
}

// starlarkTestServer serves the Starlark agent src, named name, over a
// memory store, with the mock provider.
func starlarkTestServer(t *testing.T, name, src string) *testServer {
	t.Helper()
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(10000))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, name+".star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := builtins.NewState(vm.Options{Store: store, Root: dir, Stdout: io.Discard, Stderr: io.Discard, MaxTurns: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.LLM.Provider = "mock"
	h, err := st.LoadHandler(file)
	if err != nil {
		t.Fatal(err)
	}
	return newTestServer(t, Config{Store: store, Agents: map[string]Agent{name: h}})
}

// TestStreamOrderOfATurn checks the order docs/serve.md gives for the
// frames of one turn. Stored events come in seq order, each once. Live
// frames come when they happen: a model call's session_state and
// text_delta frames before the llm_call and reply of that call (the
// step is committed once the reply is complete); a tool's
// tool_executing before its result; session:turn_completed is the
// turn's last stored event and the idle state its last frame.
// snakeCase matches a snake_case key.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func TestStreamOrderOfATurn(t *testing.T) {
	src := `
def lookup():
    return "42"

def handle(session_id, text):
    llm_mock(tool_calls = [{"name": "lookup"}])
    llm_mock(text = "it is 42")
    agent_loop(text, session_id = session_id, tools = [lookup])
`
	ts := starlarkTestServer(t, "order", src)
	id := ts.create(map[string]any{"agent": "order"})
	s := ts.events(id, "")
	s.waitComment(t, "ready")
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "go"}), http.StatusAccepted, "")
	var all, stored []string
	lastStored := int64(0)
	at := map[string]int{} // the position of each frame, by name
	for {
		f := s.next(t)
		name := fmt.Sprint(f.data["type"])
		// one casing: an event's keys are snake_case (stopReason is the
		// specification's own name)
		for k := range f.data {
			if !snakeCase.MatchString(k) && k != "stopReason" {
				t.Errorf("frame %s: key %q is not snake_case", name, k)
			}
		}
		switch name {
		case "message":
			name += ":" + fmt.Sprint(f.data["role"])
		case "session_state":
			name = fmt.Sprint(f.data["state"])
		}
		if f.id != "" {
			seq, _ := strconv.ParseInt(f.id, 10, 64)
			if seq <= lastStored {
				t.Fatalf("frame %s: id %d after %d", name, seq, lastStored)
			}
			lastStored = seq
			stored = append(stored, name)
		} else if name != "text_delta" && f.data["type"] != "session_state" {
			t.Fatalf("frame %s without an id", name)
		}
		// a repeated frame is numbered: the second turn_end is turn_end2
		key := name
		for n := 2; ; n++ {
			if _, seen := at[key]; !seen {
				break
			}
			key = fmt.Sprint(name, n)
		}
		at[key] = len(all)
		all = append(all, name)
		if name == "idle" {
			break
		}
	}
	want := "message:user turn_start llm_call message:assistant tool_call message:tool tool_result turn_end " +
		"turn_start llm_call message:assistant turn_end session:turn_completed"
	if got := strings.Join(stored, " "); got != want {
		t.Fatalf("stored frames: %s\nwant %s", got, want)
	}
	before := func(a, b string) {
		t.Helper()
		if at[a] >= at[b] {
			t.Fatalf("%s after %s in %s", a, b, strings.Join(all, " "))
		}
	}
	before("llm_generating", "llm_call")
	before("llm_call", "tool_executing")
	before("tool_call", "tool_executing") // not a quick tool yet: its call is committed first
	before("tool_executing", "message:tool")
	before("turn_end", "llm_generating2")
	before("llm_generating2", "text_delta")
	before("text_delta", "llm_call2")
	before("text_delta", "message:assistant2")
	before("session:turn_completed", "idle")
	if all[len(all)-2] != "session:turn_completed" {
		t.Fatalf("frames end %s", strings.Join(all[len(all)-2:], " "))
	}
}
