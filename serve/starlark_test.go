package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// agentSource is a Starlark agent: an agent loop on the mock provider,
// then reads of the session it wrote, on the prompt's own thread.
const agentSource = `
def handle(session_id, text):
    r = agent_loop(text, system = "You echo.", session_id = session_id)
    snap = agent_session_snapshot(session_id)
    last = snap["messages"][-1]
    if last["role"] != "assistant" or last["content"] != r["text"]:
        fail("the reply is not the session's last message")
    if not last["content"].endswith(text):
        fail("reply %r does not answer %r" % (last["content"], text))
`

// starlarkServer serves agent source from a fresh VM over store; opts
// adjust the server's configuration.
func starlarkServer(t testing.TB, store *sessions.Store, source string, maxSessions int, opts ...func(*serve.Config)) (*serve.Server, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "echo.star")
	if err := os.WriteFile(file, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	// A test that fails prints the server's log (debug and up) and the
	// agent's output, so that a failure says what the server did (which
	// turns ran, a queued prompt dropped and why). A benchmark keeps none.
	logger, out := slog.New(slog.DiscardHandler), io.Writer(io.Discard)
	if _, bench := t.(*testing.B); !bench {
		logs := &syncBuffer{}
		logger, out = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("server log:\n%s", logs.String())
			}
		})
	}
	// As skein serve without --max-turns: no default turn cap.
	st, err := builtins.NewState(vm.Options{Store: store, Root: dir, Stdout: out, Stderr: out, MaxTurns: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.LLM.Provider = "mock"
	h, err := st.LoadHandler(file)
	if err != nil {
		t.Fatal(err)
	}
	if h.Name() != "echo" {
		t.Fatalf("agent name %q", h.Name())
	}
	cfg := serve.Config{Store: store, Agents: map[string]serve.Agent{"echo": h}, Token: "t",
		MaxSessions: maxSessions, MaxRunning: maxSessions, Logger: logger}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.CloseClientConnections(); srv.Close(); hs.Close() })
	return srv, hs
}

// withRepos registers repositories ids, directories of a new workspace
// root, and returns their resolved paths.
func withRepos(t testing.TB, paths map[string]string, ids ...string) func(*serve.Config) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return func(c *serve.Config) {
		c.WorkspaceRoot, c.Repos = root, map[string]string{}
		for _, id := range ids {
			dir := filepath.Join(root, id)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.Repos[id] = dir
			if paths != nil {
				paths[id] = dir
			}
		}
	}
}

func call(t testing.TB, hs *httptest.Server, method, path string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, hs.URL+path, rd)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	var out map[string]any
	json.Unmarshal(data, &out)
	return out
}

// logEventsOnFailure prints session id's event log if the test fails.
func logEventsOnFailure(t testing.TB, store *sessions.Store, id string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		rec, err := store.Snapshot(context.Background(), id)
		if err != nil {
			t.Logf("events of %s: %v", id, err)
			return
		}
		var b strings.Builder
		for _, e := range rec.Events {
			fmt.Fprintf(&b, "%d %s %s %v\n", e.Seq, e.Time.Format("15:04:05.000000"), e.Type, e.Data)
		}
		t.Logf("events of %s:\n%s", id, b.String())
	})
}

// waitTurn polls until the session has no running turn.
func waitTurn(t testing.TB, hs *httptest.Server, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := call(t, hs, "GET", "/api/sessions/"+id, nil, 200)
		if s["running"] == false {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: turn still running", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentStarlarkSessions runs 50 sessions at once, each prompt on
// its own Starlark thread of one VM over one store (run it with -race).
func TestConcurrentStarlarkSessions(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(1000))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := starlarkServer(t, store, agentSource, 50, withRepos(t, nil, "repo-0", "repo-1", "repo-2", "repo-3", "repo-4"))
	const n, prompts = 50, 3
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": fmt.Sprint("repo-", i%5)}, 201)["id"].(string)
			for p := range prompts {
				call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": fmt.Sprintf("s%d p%d", i, p)}, 202)
				waitTurn(t, hs, id)
			}
			s := call(t, hs, "GET", "/api/sessions/"+id, nil, 200)
			msgs := s["messages"].([]any)
			if s["status"] != "active" || len(msgs) != 2*prompts {
				t.Errorf("session %d: %s, %d messages", i, s["status"], len(msgs))
				return
			}
			for p := range prompts {
				u, a := msgs[2*p].(map[string]any), msgs[2*p+1].(map[string]any)
				want := fmt.Sprintf("s%d p%d", i, p)
				if u["role"] != "user" || u["content"] != want || a["role"] != "assistant" || a["content"] != "Mock response to 2-word prompt: "+want {
					t.Errorf("session %d turn %d: %v / %v", i, p, u, a)
				}
			}
		})
	}
	wg.Wait()
	l := call(t, hs, "GET", "/api/sessions?repoId=repo-3&limit=100", nil, 200)
	if l["total"].(float64) != 10 {
		t.Fatalf("repo-3 sessions: %v", l["total"])
	}
}

// TestAgentErrors: a handler that fails makes the session "error" with
// the Starlark traceback in a system message; a bad agent file is
// refused at load.
func TestAgentErrors(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, "def handle(session_id, text):\n    fail('no model for ' + text)\n", 5)
	id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
	call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "x"}, 202)
	s := waitTurn(t, hs, id)
	msgs := s["messages"].([]any)
	if s["status"] != "error" || len(msgs) != 2 {
		t.Fatalf("after a failing handler: %v", s)
	}
	if text := msgs[1].(map[string]any)["content"].(string); !bytes.Contains([]byte(text), []byte("no model for x")) || !bytes.Contains([]byte(text), []byte("echo.star:2")) {
		t.Fatalf("error message %q", text)
	}

	dir := t.TempDir()
	st, _ := builtins.NewState(vm.Options{Root: dir})
	for src, want := range map[string]string{
		"x = 1\n":                                "defines no function handle(session_id, text)",
		"handle = 3\n":                           "handle is a int, want a function",
		"def handle(text):\n    pass\n":          "must take exactly two parameters",
		"def handle(a, b, *c):\n    pass\n":      "must take exactly two parameters",
		"def handle(a, b):\n    pass\nfail('x')": "agent",
	} {
		file := filepath.Join(dir, "bad.star")
		os.WriteFile(file, []byte(src), 0o644)
		if _, err := st.LoadHandler(file); err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("LoadHandler(%q): %v, want %q", src, err, want)
		}
	}
}

// TestExampleAgents serves every agent in examples/agents on the mock
// provider and has each answer a prompt.
func TestExampleAgents(t *testing.T) {
	files, err := filepath.Glob("../examples/agents/*.star")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example agents: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			store, _ := sessions.NewStore(sessions.NewMemoryBackend())
			_, hs := starlarkServer(t, store, string(src), 5)
			id := call(t, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
			call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "What is in this directory?"}, 202)
			s := waitTurn(t, hs, id)
			msgs := s["messages"].([]any)
			if s["status"] != "active" || len(msgs) < 2 || msgs[len(msgs)-1].(map[string]any)["role"] != "assistant" {
				t.Fatalf("%s: %v", file, s)
			}
		})
	}
}
