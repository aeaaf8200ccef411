package mcp_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/mcp/mcptest"
	"github.com/skein-dev/skein/workspace"
)

func policy(t *testing.T, c workspace.Config) *workspace.Policy { return mcptest.Policy(t, c) }

func connect(t *testing.T, spec mcp.Spec, p *workspace.Policy) *mcp.Server {
	t.Helper()
	s, err := mcp.Connect(context.Background(), spec, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestEverythingStdio(t *testing.T) {
	n := mcptest.Find(t)
	s := connect(t, mcp.Spec{Command: n.Everything()}, policy(t, workspace.Config{AllowCmds: []string{"node"}}))
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name())
	}
	t.Logf("server %q tools: %v", s.Name(), names)
	ctx := context.Background()
	r, err := s.Call(ctx, "echo", map[string]any{"message": "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Text(); got != "Echo: hello" {
		t.Errorf("echo: got %q", got)
	}
	r, err = s.Call(ctx, "get-sum", map[string]any{"a": int64(2), "b": 3.5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Text(); got != "The sum of 2 and 3.5 is 5.5." {
		t.Errorf("get-sum: got %q", got)
	}
	r, err = s.Call(ctx, "get-tiny-image", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	imgs := r.Images()
	if len(imgs) != 1 || imgs[0].MediaType != "image/png" {
		t.Fatalf("get-tiny-image: got %+v", r.Content)
	}
	png, err := base64.StdEncoding.DecodeString(imgs[0].Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("get-tiny-image: data is not a base64 PNG (%v)", err)
	}
	r, err = s.Call(ctx, "get-structured-content", map[string]any{"location": "Chicago"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, ok := r.Data.(map[string]any)
	if !ok || data["temperature"] != int64(36) || data["conditions"] != "Light rain / drizzle" {
		t.Errorf("get-structured-content: data %#v", r.Data)
	}
	// the schema is enforced before anything is sent
	if _, err := s.Call(ctx, "get-structured-content", map[string]any{"location": "Paris"}, nil); err == nil || !strings.Contains(err.Error(), "location") {
		t.Errorf("get-structured-content with a bad enum: got %v", err)
	}
	if _, err := s.Call(ctx, "get-sum", map[string]any{"a": "2", "b": 3}, nil); err == nil || !strings.Contains(err.Error(), "invalid arguments for tool get-sum") {
		t.Errorf("get-sum with a string: got %v", err)
	}
}

func TestProgressAndCancel(t *testing.T) {
	n := mcptest.Find(t)
	s := connect(t, mcp.Spec{Command: n.Everything()}, policy(t, workspace.Config{AllowCmds: []string{"node"}}))
	var got []mcp.Progress
	r, err := s.Call(context.Background(), "trigger-long-running-operation", map[string]any{"duration": 0.6, "steps": int64(3)},
		func(p mcp.Progress) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Text(), "Long running operation completed") {
		t.Errorf("result %q", r.Text())
	}
	if len(got) != 3 || got[2].Progress != 3 || got[2].Total != 3 {
		t.Errorf("progress: got %+v, want 3 notifications up to 3/3", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err = s.Call(ctx, "trigger-long-running-operation", map[string]any{"duration": 30, "steps": int64(30)}, nil)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancelled call returned after %v", d)
	}
	// the server is still usable
	if _, err := s.Call(context.Background(), "echo", map[string]any{"message": "after"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyBeforeStart(t *testing.T) {
	n := mcptest.Find(t)
	ctx := context.Background()
	// no --allow-cmd: refused before anything starts
	_, err := mcp.Connect(ctx, mcp.Spec{Command: n.Everything()}, policy(t, workspace.Config{}))
	if !errors.Is(err, workspace.ErrNotAllowed) || !strings.Contains(err.Error(), "--allow-cmd") {
		t.Errorf("no allowed commands: got %v", err)
	}
	// a variable not on --allow-env
	_, err = mcp.Connect(ctx, mcp.Spec{Command: n.Everything(), Env: map[string]string{"GREETING": "hi"}}, policy(t, workspace.Config{AllowCmds: []string{"node"}}))
	if !errors.Is(err, workspace.ErrNotAllowed) || !strings.Contains(err.Error(), "--allow-env") {
		t.Errorf("env not allowed: got %v", err)
	}
	// NODE_OPTIONS is never allowed, whatever --allow-env says
	_, err = mcp.Connect(ctx, mcp.Spec{Command: n.Everything(), Env: map[string]string{"NODE_OPTIONS": "--require /tmp/x.js"}}, policy(t, workspace.Config{AllowCmds: []string{"node"}, AllowEnv: []string{"*"}}))
	if !errors.Is(err, workspace.ErrNotAllowed) {
		t.Errorf("NODE_OPTIONS: got %v", err)
	}
	// an url host not on --allow-net
	_, err = mcp.Connect(ctx, mcp.Spec{URL: "http://127.0.0.1:9/mcp"}, policy(t, workspace.Config{AllowNet: []string{"example.com"}}))
	if !errors.Is(err, workspace.ErrNotAllowed) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("url not allowed: got %v", err)
	}
	for _, bad := range []mcp.Spec{{}, {Command: []string{"node"}, URL: "http://x"}, {Command: []string{}}, {URL: "http://x", Env: map[string]string{"A": "b"}}, {Command: []string{"node"}, Prefix: "a.b"}} {
		if _, err := mcp.Connect(ctx, bad, policy(t, workspace.Config{AllowCmds: []string{"node"}})); err == nil || errors.Is(err, workspace.ErrNotAllowed) {
			t.Errorf("Connect(%+v): got %v, want a spec error", bad, err)
		}
	}
}

func TestServerEnvironment(t *testing.T) {
	n := mcptest.Find(t)
	t.Setenv("SKEIN_TEST_NOT_PASSED", "parent-value")
	t.Setenv("SKEIN_TEST_PASSED", "passed-value")
	secret := workspace.NewSecret("MCP_TOKEN", "s3cret-token-value")
	s := connect(t, mcp.Spec{Command: n.Everything(), Env: map[string]string{"GREETING": "hi"}, SecretEnv: map[string]workspace.Secret{"MCP_TOKEN": secret}},
		policy(t, workspace.Config{AllowCmds: []string{"node"}, AllowEnv: []string{"GREETING", "MCP_TOKEN", "SKEIN_TEST_PASSED"}}))
	r, err := s.Call(context.Background(), "get-env", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, ok := r.Data.(map[string]any)
	if !ok {
		var err error
		x, err := decodeObject(r.Text())
		if err != nil {
			t.Fatalf("get-env: %v in %q", err, r.Text())
		}
		env = x
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "GREETING": true, "MCP_TOKEN": true, "SKEIN_TEST_PASSED": true}
	for k := range env {
		if !allowed[k] {
			t.Errorf("the server's environment holds %s, which was not allowed", k)
		}
	}
	if env["GREETING"] != "hi" || env["MCP_TOKEN"] != "s3cret-token-value" || env["SKEIN_TEST_PASSED"] != "passed-value" || env["PATH"] == nil {
		t.Errorf("get-env: %v", env)
	}
}

// testServer returns the spec of the test binary's own MCP server (see
// TestMain) and a policy that allows it.
func testServer(t *testing.T) (mcp.Spec, *workspace.Policy) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcp.Spec{Name: "test", Command: []string{exe, "mcp-test-server"}}, policy(t, workspace.Config{AllowCmds: []string{exe}})
}

func TestTimeout(t *testing.T) {
	spec, p := testServer(t)
	spec.Timeout = 300 * time.Millisecond
	s := connect(t, spec, p)
	start := time.Now()
	_, err := s.Call(context.Background(), "sleep", nil, nil)
	if err == nil || err.Error() != "mcp server 'test': tool 'sleep' timed out after 300ms" {
		t.Fatalf("timeout: got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timed-out call returned after %v", d)
	}
	if _, err := s.Call(context.Background(), "say", map[string]any{"text": "x"}, nil); err != nil {
		t.Errorf("a call after a timeout: %v", err)
	}
}

func TestServerDeath(t *testing.T) {
	spec, p := testServer(t)
	s := connect(t, spec, p)
	_, err := s.Call(context.Background(), "die", nil, nil)
	want := "mcp server 'test' exited (exit status 3); stderr: fatal: the test server dies"
	if err == nil || err.Error() != want {
		t.Fatalf("call that kills the server: got %v, want %s", err, want)
	}
	if _, err := s.Call(context.Background(), "say", nil, nil); err == nil || err.Error() != want {
		t.Errorf("call after the death: got %v, want %s", err, want)
	}
}

func TestResultMapping(t *testing.T) {
	spec, p := testServer(t)
	s := connect(t, spec, p)
	r, err := s.Call(context.Background(), "links", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "[resource link: a.txt <file:///tmp/a.txt> (text/plain)] a file\n[resource <mem://note> (text/plain)]\nthe note\n[resource <mem://blob>, 3 bytes]\n[audio audio/wav, 2 bytes]"
	if got := r.Text(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r, err = s.Call(context.Background(), "fail", nil, nil)
	var te *mcp.ToolError
	if !errors.As(err, &te) || err.Error() != "it went wrong" || r == nil || !r.IsError {
		t.Errorf("isError: got %v, %+v", err, r)
	}
}

func TestCloseStopsProcess(t *testing.T) {
	n := mcptest.Find(t)
	s := connect(t, mcp.Spec{Command: n.Everything()}, policy(t, workspace.Config{AllowCmds: []string{"node"}}))
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("close took %v", time.Since(start))
	if _, err := s.Call(context.Background(), "echo", map[string]any{"message": "x"}, nil); err == nil || !strings.Contains(err.Error(), "is closed") {
		t.Errorf("call after close: got %v", err)
	}
}

func TestEverythingStreamableHTTP(t *testing.T) {
	n := mcptest.Find(t)
	url := n.EverythingHTTP(t)
	s := connect(t, mcp.Spec{URL: url}, policy(t, workspace.Config{AllowNet: []string{"127.0.0.1"}}))
	r, err := s.Call(context.Background(), "echo", map[string]any{"message": "over http"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Text(); got != "Echo: over http" {
		t.Errorf("echo: got %q", got)
	}
	var got []mcp.Progress
	if _, err := s.Call(context.Background(), "trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": int64(2)},
		func(p mcp.Progress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("progress over http: got %+v", got)
	}
}

func TestFilesystemServer(t *testing.T) {
	n := mcptest.Find(t)
	root := t.TempDir()
	if err := os.WriteFile(root+"/notes.txt", []byte("remember the milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := connect(t, mcp.Spec{Command: n.Filesystem(root), Prefix: "fs_"}, policy(t, workspace.Config{Root: root, AllowCmds: []string{"node"}}))
	tool, err := s.Tool("fs_read_text_file")
	if err != nil {
		t.Fatal(err)
	}
	if tool.MCPName() != "read_text_file" {
		t.Errorf("MCPName %q", tool.MCPName())
	}
	r, err := s.Call(context.Background(), "fs_read_text_file", map[string]any{"path": root + "/notes.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Text(); got != "remember the milk\n" {
		t.Errorf("read_text_file: got %q", got)
	}
	_, err = s.Call(context.Background(), "read_text_file", map[string]any{"path": "/etc/passwd"}, nil)
	var te *mcp.ToolError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "denied") {
		t.Errorf("read outside the server's roots: got %v", err)
	}
}

// TestHeaders: an url server gets the headers, the secret ones revealed
// only on the wire, and only at the endpoint's origin.
func TestHeaders(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "headers", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	})
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	var seen atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123456" || r.Header.Get("X-Team") != "blue" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		seen.Add(1)
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the servers' Close (cleanups run last first)
	host := strings.TrimPrefix(ts.URL, "http://")
	p := policy(t, workspace.Config{AllowNet: []string{host}})
	spec := mcp.Spec{URL: ts.URL, Headers: map[string]string{"X-Team": "blue"}, SecretHeaders: map[string]workspace.Secret{"Authorization": workspace.NewSecret("TOKEN", "Bearer tok-123456")}}
	s := connect(t, spec, p)
	r, err := s.Call(context.Background(), "whoami", nil, nil)
	if err != nil || r.Text() != "ok" || seen.Load() == 0 {
		t.Fatalf("whoami: %v %v", r, err)
	}
	// without the secret header the server refuses, and the error does
	// not show the header
	spec.SecretHeaders = nil
	_, err = mcp.Connect(context.Background(), spec, p)
	if err == nil || strings.Contains(err.Error(), "tok-123456") {
		t.Errorf("without the token: %v", err)
	}
}
