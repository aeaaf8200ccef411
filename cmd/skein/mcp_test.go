package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/mcp/mcptest"
)

// mcpPipeline is the script `skein mcp` serves in the tests: a pipeline
// (an agent_loop on the mock) and a helper that is not a tool.
const mcpPipeline = `
def _shout(s):
    return s.upper()

def summarise(text, words = 3):
    """Summarise a text with an agent.

    Args:
      text (str): the text.
      words (int): at most this many words.
    """
    llm_mock(text = _shout(" ".join(text.split(" ")[:words])))
    r = agent_loop("Summarise: " + text, provider = "mock")
    return {"summary": r["text"], "status": r["status"]}

def broken():
    """Always fails."""
    fail("this pipeline is broken")

def undocumented():
    return 1
`

type mcpClientOutput struct {
	Server struct{ Name string }
	Tools  []struct {
		Name        string
		Description string
		InputSchema map[string]any
	}
	Result struct {
		Content []struct {
			Type, Text string
		}
		StructuredContent map[string]any
		IsError           bool
	}
}

// runMCPClient runs the TypeScript SDK's client with args and decodes
// what it prints.
func runMCPClient(t *testing.T, n *mcptest.Node, args ...string) mcpClientOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Node, append([]string{filepath.Join(n.Modules, "..", "client.mjs")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var got mcpClientOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	return got
}

func checkMCPTools(t *testing.T, got mcpClientOutput) {
	t.Helper()
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "broken,summarise" {
		t.Errorf("tools %v, want broken and summarise (documented, not starting with _)", names)
	}
	for _, tool := range got.Tools {
		if tool.Name == "summarise" {
			if tool.Description != "Summarise a text with an agent." {
				t.Errorf("description %q", tool.Description)
			}
			props, _ := tool.InputSchema["properties"].(map[string]any)
			words, _ := props["words"].(map[string]any)
			if words["type"] != "integer" || words["description"] != "at most this many words." {
				t.Errorf("schema %v", tool.InputSchema)
			}
		}
	}
}

// TestMCPServeStdio: the official TypeScript SDK's client starts `skein
// mcp FILE.star`, lists its tools and calls one: the pipeline's result.
func TestMCPServeStdio(t *testing.T) {
	n := mcptest.Find(t)
	bin := skeinBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.star")
	if err := os.WriteFile(file, []byte(mcpPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	got := runMCPClient(t, n, "stdio", "summarise", `{"text": "the quick brown fox jumps", "words": 2}`, "--", bin, "mcp", "--store", "memory", file)
	checkMCPTools(t, got)
	if got.Server.Name != "pipeline" {
		t.Errorf("server name %q", got.Server.Name)
	}
	if got.Result.IsError || len(got.Result.Content) != 1 || got.Result.StructuredContent["summary"] != "THE QUICK" {
		t.Errorf("result %+v", got.Result)
	}
	got = runMCPClient(t, n, "stdio", "broken", `{}`, "--", bin, "mcp", "--store", "memory", file)
	if !got.Result.IsError || len(got.Result.Content) != 1 || !strings.Contains(got.Result.Content[0].Text, "this pipeline is broken") {
		t.Errorf("broken: %+v", got.Result)
	}
	got = runMCPClient(t, n, "stdio", "summarise", `{"text": 3}`, "--", bin, "mcp", "--store", "memory", file)
	if !got.Result.IsError || !strings.Contains(got.Result.Content[0].Text, "invalid arguments for tool summarise: arguments.text:") {
		t.Errorf("bad arguments: %+v", got.Result)
	}
}

// TestMCPServeHTTP: the same over Streamable HTTP, with the bearer token.
func TestMCPServeHTTP(t *testing.T) {
	n := mcptest.Find(t)
	bin := skeinBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.star")
	if err := os.WriteFile(file, []byte(mcpPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--store", "memory", "--addr", "127.0.0.1:0", file)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	var url, token string
	sc := bufio.NewScanner(stderr)
	tokenLine, listenLine := regexp.MustCompile(`^skein mcp: token (\S+)$`), regexp.MustCompile(`^skein mcp: listening on (\S+)$`)
	for url == "" && sc.Scan() {
		if m := tokenLine.FindStringSubmatch(sc.Text()); m != nil {
			token = m[1]
		}
		if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" || token == "" {
		t.Fatalf("skein mcp --addr printed no url and token")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	got := runMCPClient(t, n, "http", "summarise", `{"text": "over streamable http"}`, url+"/mcp", token)
	checkMCPTools(t, got)
	if got.Result.IsError || got.Result.StructuredContent["summary"] != "OVER STREAMABLE HTTP" {
		t.Errorf("result %+v", got.Result)
	}
	resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without the token: status %d, want 401", resp.StatusCode)
	}
}

// TestMCPRunTimeout: --timeout stops an agent loop waiting on a
// long-running MCP tool within a second of the deadline, and the stored
// session is healed.
func TestMCPRunTimeout(t *testing.T) {
	n := mcptest.Find(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "long.star")
	src := `
ev = mcp_server(command = argv)
llm_mock(tool_calls = [{"name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60}}])
agent_loop("go", tools = ev.tools, session_id = "long")
`
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "sessions.db")
	args := append([]string{"run", "--store", db, "--provider", "mock", "--allow-cmd", "node", "--timeout", "8s", file, "--"}, n.Everything()...)
	start := time.Now()
	var out, errOut strings.Builder
	code := skein(args, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	elapsed := time.Since(start)
	if code != exitFailed || !strings.Contains(errOut.String(), "timeout: the run exceeded --timeout 8s") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if elapsed > 9*time.Second {
		t.Errorf("the run ended %v after it started, more than a second after its 8 s timeout", elapsed)
	}
	var show strings.Builder
	if code := skein([]string{"sessions", "show", "--store", db, "long"}, stdio{in: strings.NewReader(""), out: &show, err: &show}); code != exitOK {
		t.Fatalf("sessions show: %s", show.String())
	}
	if !strings.Contains(show.String(), "cancelled") {
		t.Errorf("the session was not healed:\n%s", show.String())
	}
}
