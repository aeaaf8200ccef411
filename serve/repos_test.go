package serve_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/export"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// readerSource is an agent whose model (the mock) asks to read the file
// the prompt names, with the built-in read_file tool, then answers.
const readerSource = `
def handle(session_id, text):
    llm_mock(tool_calls = [{"name": "read_file", "arguments": {"path": text}}])
    llm_mock(text = "done")
    agent_loop("read " + text, session_id = session_id, tools = [tools.read_file])
`

func withLog(buf *syncBuffer) func(*serve.Config) {
	return func(c *serve.Config) { c.Logger = slog.New(slog.NewTextHandler(buf, nil)) }
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRepoConfinesAgent: an agent in a session bound to repository A
// reads A's files, and cannot read outside A: not repository B (through
// "..", an absolute path, a symbolic link) nor a file outside the
// workspace root. Each refusal is a security_decision event of the
// session (in its forensic log) and a line of the server's log. The
// session shows its repository.
func TestRepoConfinesAgent(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	var logs syncBuffer
	opt := withRepos(t, paths, "repo-a", "repo-b")
	_, hs := starlarkServer(t, store, readerSource, 5, opt, withLog(&logs))
	a, b := paths["repo-a"], paths["repo-b"]
	root := filepath.Dir(a)
	writeFile(t, filepath.Join(a, "src", "a.txt"), "alpha in A")
	writeFile(t, filepath.Join(b, "b.txt"), "beta in B")
	outside := filepath.Join(filepath.Dir(root), filepath.Base(root)+"-outside.txt")
	writeFile(t, outside, "outside the root")
	t.Cleanup(func() { os.Remove(outside) })
	if err := os.Symlink(filepath.Join(b, "b.txt"), filepath.Join(a, "link-to-b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, filepath.Join(a, "dir-link")); err != nil {
		t.Fatal(err)
	}

	s := call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "repo-a"}, 201)
	id := s["id"].(string)
	if r, _ := s["repo"].(map[string]any); r["id"] != "repo-a" || r["path"] != a {
		t.Fatalf("created session's repo: %v", s["repo"])
	}
	got := call(t, hs, "GET", "/api/sessions/"+id, nil, 200)
	if r, _ := got["repo"].(map[string]any); got["repoId"] != "repo-a" || r["id"] != "repo-a" || r["path"] != a || r["createdAt"] == "" {
		t.Fatalf("GET session: repoId %v, repo %v", got["repoId"], got["repo"])
	}

	// read prompts the agent to read path and returns the tool result.
	read := func(id, path string) (string, bool) {
		t.Helper()
		call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": path}, 202)
		msgs := waitTurn(t, hs, id)["messages"].([]any)
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i].(map[string]any)
			if m["role"] == "tool" {
				text, _ := m["content"].(string)
				isErr, _ := m["isError"].(bool)
				return text, isErr
			}
		}
		t.Fatalf("no tool result after reading %s", path)
		return "", false
	}
	if text, isErr := read(id, "src/a.txt"); isErr || !strings.Contains(text, "alpha in A") {
		t.Fatalf("reading a file of the repository: %q (error %v)", text, isErr)
	}
	escapes := []string{
		"../repo-b/b.txt",
		filepath.Join(b, "b.txt"),
		"link-to-b.txt",
		"dir-link/b.txt",
		"../../" + filepath.Base(outside),
		outside,
		"/etc/passwd",
	}
	for _, p := range escapes {
		text, isErr := read(id, p)
		if !isErr || strings.Contains(text, "beta") || strings.Contains(text, "outside the root") || strings.Contains(text, "root:") {
			t.Fatalf("reading %s from repository A: %q (error %v), want a refusal", p, text, isErr)
		}
		if !strings.Contains(text, "outside the workspace") {
			t.Errorf("refusal of %s: %q", p, text)
		}
	}

	// Every refusal is a security_decision event naming the path and the
	// rule, and a record of the forensic log.
	rec, err := store.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for _, e := range rec.Events {
		if e.Type == "security_decision" {
			decisions = append(decisions, e.Data["action"].(string)+" | "+e.Data["rule"].(string))
		}
	}
	if len(decisions) != len(escapes) {
		t.Fatalf("security decisions %q, want one per escape (%d)", decisions, len(escapes))
	}
	for i, p := range escapes {
		if decisions[i] != "read "+p+" | fs scope sandboxed" {
			t.Errorf("decision %d: %q, want read %s by fs scope sandboxed", i, decisions[i], p)
		}
	}
	var forensic bytes.Buffer
	if err := export.WriteForensic(&forensic, rec, nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(forensic.String(), `"type":"security_decision","timestamp"`); n != len(escapes) {
		t.Errorf("forensic log: %d security_decision records, want %d", n, len(escapes))
	}
	log := logs.String()
	if n := strings.Count(log, "security: refused"); n != len(escapes) {
		t.Errorf("server log: %d security lines, want %d:\n%s", n, len(escapes), log)
	}
	if !strings.Contains(log, `action="read ../repo-b/b.txt"`) || !strings.Contains(log, "session="+id) {
		t.Errorf("server log does not name the refused read and the session:\n%s", log)
	}
	if !strings.Contains(log, "repo=repo-a path="+a) {
		t.Errorf("server log does not record the session's repository path:\n%s", log)
	}

	// A session bound to B reads B, not A.
	idB := call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "repo-b"}, 201)["id"].(string)
	if text, isErr := read(idB, "b.txt"); isErr || !strings.Contains(text, "beta in B") {
		t.Fatalf("reading B's file from B: %q (error %v)", text, isErr)
	}
	if text, isErr := read(idB, "../repo-a/src/a.txt"); !isErr || strings.Contains(text, "alpha") {
		t.Fatalf("reading A's file from B: %q (error %v)", text, isErr)
	}
	// A session with no repository keeps the server's workspace.
	call(t, hs, "POST", "/api/sessions", nil, 201)
}

// TestRepoSwappedForLink: a repository directory replaced by a symbolic
// link that leads out of the workspace root refuses the next prompt
// (409), records a security_decision event and logs it.
func TestRepoSwappedForLink(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	paths := map[string]string{}
	var logs syncBuffer
	_, hs := starlarkServer(t, store, readerSource, 5, withRepos(t, paths, "repo-a"), withLog(&logs))
	id := call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "repo-a"}, 201)["id"].(string)
	a := paths["repo-a"]
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "secret.txt"), "secret")
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, a); err != nil {
		t.Fatal(err)
	}
	r := call(t, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "secret.txt"}, 409)
	if e := r["error"].(map[string]any); e["code"] != "repo_unavailable" || !strings.Contains(e["message"].(string), "outside the workspace root") {
		t.Fatalf("prompt after the swap: %v", r)
	}
	rec, _ := store.Snapshot(context.Background(), id)
	found := false
	for _, e := range rec.Events {
		found = found || e.Type == "security_decision" && e.Data["action"] == "bind repo repo-a"
	}
	if !found || len(rec.Messages) != 0 {
		t.Fatalf("after the refused prompt: security event %v, %d messages", found, len(rec.Messages))
	}
	if !strings.Contains(logs.String(), "security: refused") {
		t.Errorf("not logged:\n%s", logs.String())
	}
	// A new session cannot bind it either.
	call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "repo-a"}, 409)
}

// TestReposPersist: repositories registered with POST /api/repos and
// Config.Repos are kept in the store: a server restarted on the same
// SQLite file lists them and binds sessions to them; Config.Repos gives
// a registered id a new path.
func TestReposPersist(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sessions.db")
	root, _ := filepath.EvalSymlinks(t.TempDir())
	for _, d := range []string{"one", "two", "three"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	start := func(repos map[string]string) (*serve.Server, func(method, path string, body any, want int) map[string]any, func()) {
		b, err := sqlite.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		store, _ := sessions.NewStore(b)
		srv, hs := starlarkServer(t, store, agentSource, 5, func(c *serve.Config) { c.WorkspaceRoot, c.Repos = root, repos })
		return srv, func(method, path string, body any, want int) map[string]any {
				t.Helper()
				return call(t, hs, method, path, body, want)
			}, func() {
				hs.CloseClientConnections()
				srv.Close()
				hs.Close()
				store.Shutdown()
			}
	}
	_, do, stop := start(map[string]string{"one": "one"})
	do("POST", "/api/repos", map[string]any{"id": "two", "path": "two"}, 201)
	first := do("GET", "/api/repos", nil, 200)
	stop()

	_, do, stop = start(map[string]string{"one": filepath.Join(root, "three")})
	l := do("GET", "/api/repos", nil, 200)
	repos := l["repos"].([]any)
	if len(repos) != 2 || l["workspaceRoot"] != root {
		t.Fatalf("after a restart: %v", l)
	}
	one, two := repos[0].(map[string]any), repos[1].(map[string]any)
	if one["id"] != "one" || one["path"] != filepath.Join(root, "three") || two["id"] != "two" || two["path"] != filepath.Join(root, "two") {
		t.Fatalf("after a restart: %v", repos)
	}
	// created times are kept, also for the one whose path changed
	before := first["repos"].([]any)
	if one["createdAt"] != before[0].(map[string]any)["createdAt"] || two["createdAt"] != before[1].(map[string]any)["createdAt"] {
		t.Fatalf("created times changed: %v then %v", before, repos)
	}
	s := do("POST", "/api/sessions", map[string]any{"repoId": "two"}, 201)
	if s["repo"].(map[string]any)["path"] != filepath.Join(root, "two") {
		t.Fatalf("session bound after a restart: %v", s)
	}
	stop()
}

// TestRepoStartErrors: serve.New refuses a repository outside the
// workspace root, a malformed id and repositories without a root.
func TestRepoStartErrors(t *testing.T) {
	root := t.TempDir()
	out := t.TempDir()
	for _, tc := range []struct {
		root  string
		repos map[string]string
		want  string
	}{
		{root, map[string]string{"x": out}, "repository x: path"},
		{root, map[string]string{"x": "../" + filepath.Base(out)}, "outside the workspace root"},
		{root, map[string]string{"../x": "."}, "must be a repository id"},
		{root, map[string]string{"x": "missing"}, "no directory"},
		{"", map[string]string{"x": "."}, "no workspace root"},
		{filepath.Join(root, "nope"), nil, "workspace root"},
	} {
		store, _ := sessions.NewStore(sessions.NewMemoryBackend())
		_, err := serve.New(serve.Config{Store: store, Agents: map[string]serve.Agent{"a": nil}, Token: "t", WorkspaceRoot: tc.root, Repos: tc.repos,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("root %q repos %v: %v, want %q", tc.root, tc.repos, err, tc.want)
		}
	}
}

// TestRepoValidation: POST /api/repos takes an existing directory inside
// the workspace root; ids, paths outside the root (through "..", an
// absolute path, a symbolic link), files and missing paths are clear
// 400s, the escapes logged as security events; a session's repoId must
// name a registered repository.
func TestRepoValidation(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	paths := map[string]string{}
	var logs syncBuffer
	_, hs := starlarkServer(t, store, agentSource, 5, withRepos(t, paths, "a"), withLog(&logs))
	root := filepath.Dir(paths["a"])
	os.Mkdir(filepath.Join(root, "b"), 0o755)
	writeFile(t, filepath.Join(root, "file.txt"), "x")
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(root, "escape"))
	os.Symlink(filepath.Join(root, "b"), filepath.Join(root, "inner-link"))

	for _, tc := range []struct {
		body     any
		status   int
		code     string
		message  string
		security bool
	}{
		{map[string]any{"path": "b"}, 400, "bad_field", "field id is required", false},
		{map[string]any{"id": "b"}, 400, "bad_field", "field path is required", false},
		{map[string]any{"id": "b", "path": "b", "Path": "c"}, 400, "unknown_field", "", false},
		{map[string]any{"id": "../../etc", "path": "b"}, 400, "bad_field", "field id must be a repository id", true},
		{map[string]any{"id": ".hidden", "path": "b"}, 400, "bad_field", "field id must be a repository id", false},
		{map[string]any{"id": "b", "path": ""}, 400, "bad_field", "field path must not be empty", false},
		{map[string]any{"id": "b", "path": "../../etc"}, 400, "path_outside_root", `field path: path "../../etc" is outside the workspace root ` + root, true},
		{map[string]any{"id": "b", "path": "/etc"}, 400, "path_outside_root", "outside the workspace root", true},
		{map[string]any{"id": "b", "path": "b/../../x"}, 400, "path_outside_root", "outside the workspace root", true},
		{map[string]any{"id": "b", "path": "escape"}, 400, "path_outside_root", `path "escape" resolves through a symbolic link to outside the workspace root`, true},
		{map[string]any{"id": "b", "path": "missing"}, 400, "bad_path", `no directory "missing"`, false},
		{map[string]any{"id": "b", "path": "file.txt"}, 400, "bad_path", "is not a directory", false},
		{map[string]any{"id": "a", "path": "b"}, 409, "repo_exists", "repository 'a' is registered with another path (" + paths["a"] + ")", false},
	} {
		before := strings.Count(logs.String(), "security: ")
		r := call(t, hs, "POST", "/api/repos", tc.body, tc.status)
		e := r["error"].(map[string]any)
		if e["code"] != tc.code || !strings.Contains(e["message"].(string), tc.message) {
			t.Errorf("POST %v: %v, want %s %q", tc.body, e, tc.code, tc.message)
		}
		if logged := strings.Count(logs.String(), "security: ") > before; logged != tc.security {
			t.Errorf("POST %v: logged as a security event %v, want %v", tc.body, logged, tc.security)
		}
	}
	r := call(t, hs, "POST", "/api/repos", map[string]any{"id": "b", "path": "inner-link"}, 201)
	if r["path"] != filepath.Join(root, "b") || r["id"] != "b" {
		t.Fatalf("registered through a link inside the root: %v", r)
	}
	call(t, hs, "POST", "/api/repos", map[string]any{"id": "b", "path": filepath.Join(root, "b")}, 200) // the same again
	call(t, hs, "GET", "/api/repos/b", nil, 200)
	call(t, hs, "GET", "/api/repos/nope", nil, 404)
	l := call(t, hs, "GET", "/api/repos", nil, 200)
	if repos := l["repos"].([]any); len(repos) != 2 || repos[0].(map[string]any)["id"] != "a" || l["workspaceRoot"] != root {
		t.Fatalf("GET /api/repos: %v", l)
	}

	// Sessions: repoId names a registered repository.
	for _, tc := range []struct {
		body     map[string]any
		status   int
		code     string
		security bool
	}{
		{map[string]any{"repoId": "nope"}, 404, "unknown_repo", false},
		{map[string]any{"repoId": "../../etc"}, 400, "bad_field", true},
		{map[string]any{"repoId": "/etc"}, 400, "bad_field", true},
		{map[string]any{"metadata": map[string]any{"repoId": "../../etc"}}, 400, "bad_field", false},
		{map[string]any{"repoId": "a", "metadata": map[string]any{"repoId": "b"}}, 400, "bad_field", false},
	} {
		before := strings.Count(logs.String(), "security: ")
		r := call(t, hs, "POST", "/api/sessions", tc.body, tc.status)
		if e := r["error"].(map[string]any); e["code"] != tc.code {
			t.Errorf("POST /api/sessions %v: %v, want %s", tc.body, e, tc.code)
		}
		if logged := strings.Count(logs.String(), "security: ") > before; logged != tc.security {
			t.Errorf("POST /api/sessions %v: logged as a security event %v, want %v", tc.body, logged, tc.security)
		}
	}
	if l := call(t, hs, "GET", "/api/sessions", nil, 200); l["total"].(float64) != 0 {
		t.Fatalf("refused creates made sessions: %v", l)
	}

	// A repository with an active session cannot be unregistered.
	id := call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "b"}, 201)["id"].(string)
	call(t, hs, "DELETE", "/api/repos/b", nil, 409)
	call(t, hs, "POST", "/api/sessions/"+id+"/complete", nil, 200)
	call(t, hs, "DELETE", "/api/repos/b", nil, 204)
	call(t, hs, "DELETE", "/api/repos/b", nil, 404)
	// The session keeps its repoId; its repository is gone.
	if s := call(t, hs, "GET", "/api/sessions/"+id, nil, 200); s["repoId"] != "b" || s["repo"] != nil {
		t.Fatalf("session of an unregistered repository: %v %v", s["repoId"], s["repo"])
	}
}

// TestReposWithoutRoot: a server without a workspace root registers no
// repository.
func TestReposWithoutRoot(t *testing.T) {
	store, _ := sessions.NewStore(sessions.NewMemoryBackend())
	_, hs := starlarkServer(t, store, agentSource, 5)
	r := call(t, hs, "POST", "/api/repos", map[string]any{"id": "a", "path": "/tmp"}, 409)
	if r["error"].(map[string]any)["code"] != "no_workspace_root" {
		t.Fatalf("%v", r)
	}
	if l := call(t, hs, "GET", "/api/repos", nil, 200); len(l["repos"].([]any)) != 0 || l["workspaceRoot"] != "" {
		t.Fatalf("%v", l)
	}
	call(t, hs, "POST", "/api/sessions", map[string]any{"repoId": "a"}, 404)
}
