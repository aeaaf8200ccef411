package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

const testToken = "test-token-0123456789"

// fakeAgent is an Agent in pure Go: it stores the prompt, waits for a
// release when block is set (or for cancellation), then stores a reply.
type fakeAgent struct {
	store *sessions.Store
	block chan struct{} // nil: reply at once
	fail  error         // returned after the prompt is stored
	skip  bool          // store nothing
	mu    sync.Mutex
	calls int
}

func (a *fakeAgent) Handle(ctx context.Context, id, text string) error {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	if a.skip {
		return a.fail
	}
	if _, err := a.store.Apply(ctx, id, &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
		return err
	}
	if a.fail != nil {
		return a.fail
	}
	if a.block != nil {
		select {
		case <-a.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.store.Publish(sessions.Event{Type: agent.EventState, SessionID: id, Data: map[string]any{"state": agent.StateLLMGenerating}})
	a.store.Publish(sessions.Event{Type: "text_delta", SessionID: id, Data: map[string]any{"text": "echo: "}})
	_, err := a.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "echo: " + text}}})
	return err
}

// testServer is a Server behind an httptest server.
type testServer struct {
	t     *testing.T
	srv   *Server
	http  *httptest.Server
	store *sessions.Store
}

func newTestServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	if cfg.Store == nil {
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(10000))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store = store
	}
	if cfg.Agents == nil {
		cfg.Agents = map[string]Agent{"echo": &fakeAgent{store: cfg.Store}}
	}
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.WorkspaceRoot == "" && cfg.Repos == nil {
		// repositories repo-1 and repo-2 in a workspace root of their own
		// (a non-nil Repos without a root: none)
		cfg.WorkspaceRoot = t.TempDir()
		cfg.Repos = map[string]string{}
		for _, id := range []string{"repo-1", "repo-2"} {
			if err := os.Mkdir(filepath.Join(cfg.WorkspaceRoot, id), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg.Repos[id] = id
		}
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		srv.Close()
		hs.Close()
	})
	return &testServer{t: t, srv: srv, http: hs, store: cfg.Store}
}

// response is a decoded response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json() map[string]any {
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		panic("response is not a JSON object: " + string(r.body))
	}
	return m
}

// code is the error code of an error response.
func (r *response) code() string {
	e, _ := r.json()["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// do sends a request with the token; body is JSON-encoded unless it is
// a string (sent as is).
func (ts *testServer) do(method, path string, body any) *response {
	ts.t.Helper()
	return ts.doAuth(method, path, body, "Bearer "+testToken)
}

func (ts *testServer) doAuth(method, path string, body any, auth string) *response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.http.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := ts.http.Client().Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// expect fails the test unless r has the status (and, for errors, the
// code).
func (ts *testServer) expect(r *response, status int, code string) {
	ts.t.Helper()
	if r.status != status {
		ts.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" && r.code() != code {
		ts.t.Fatalf("error code %q, want %q: %s", r.code(), code, r.body)
	}
}

// create makes a session and returns its id.
func (ts *testServer) create(body any) string {
	ts.t.Helper()
	r := ts.do("POST", "/api/sessions", body)
	ts.expect(r, http.StatusCreated, "")
	return r.json()["id"].(string)
}

// waitIdle waits until no turn of session id runs.
func (ts *testServer) waitIdle(id string) {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.runningAnywhere(context.Background(), []string{id})[id] {
		if time.Now().After(deadline) {
			ts.t.Fatalf("turn of %s still running", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var errBoom = errors.New("boom: the model is unreachable")
