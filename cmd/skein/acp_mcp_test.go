package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/nodetest"
	"github.com/skein-dev/skein/mcp/mcptest"
)

// acpMCPScript is a .star agent whose turn calls the echo tool of the
// client's MCP server: the script names no tools of its own.
const acpMCPScript = `
def handle(session_id, text):
    llm_mock_clear()
    llm_mock(tool_calls = [{"name": "echo", "arguments": {"message": "hello from acp"}}])
    llm_mock(text = "echoed")
    agent_loop(text, session_id = session_id, provider = "mock")
`

// TestACPClientMCPServers: the MCP servers a client (the official ACP
// TypeScript SDK) passes with session/new are started under the run's
// policy and give that session's turns their tools, for a .star agent
// and for an agent file; the tool call streams as tool_call and a
// completed tool_call_update with the server's result. A server that
// fails to start, one the command allowlist refuses, an sse server and
// two servers offering one tool name each get a JSON-RPC error naming
// the server, and no session is stored for them. The servers are
// stopped when the client goes away.
func TestACPClientMCPServers(t *testing.T) {
	nodetest.Require(t, acpNodeDir)
	node := mcptest.Find(t)
	bin := skeinBinary(t)
	for _, kind := range []string{"star", "agentfile"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			work := filepath.Join(dir, "project")
			os.MkdirAll(work, 0o755)
			db := filepath.Join(dir, "sessions.db")
			mark := "acp-mcp-" + kind + "-" + filepath.Base(dir)
			everything := node.Everything()
			server := func(name string) map[string]any {
				return map[string]any{"name": name, "command": node.Node, "args": everything[1:],
					"env": []map[string]string{{"name": "SKEIN_ACP_MCP_MARK", "value": mark}}}
			}
			servers := map[string]any{
				"good": []any{server("everything")},
				"bad": map[string]any{
					"fails":      []any{map[string]any{"name": "broken", "command": node.Node, "args": []string{"-e", "process.exit(3)"}, "env": []any{}}},
					"notAllowed": []any{map[string]any{"name": "shell", "command": "/bin/sh", "args": []string{"-c", "true"}, "env": []any{}}},
					"sse":        []any{map[string]any{"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []any{}}},
					"duplicate":  []any{server("first"), server("second")},
				},
			}
			data, _ := json.Marshal(servers)
			files := map[string]string{
				"servers.json":    string(data),
				"agent.star":      acpMCPScript,
				"echo.agent.yaml": "model: mock/echo\nsystem: You echo.\n",
				"replies.jsonl":   `{"tool_calls": [{"name": "echo", "arguments": {"message": "hello from acp"}}]}` + "\n" + `{"text": "echoed"}` + "\n",
			}
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"acp", "--store", db, "--workspace", dir, "--allow-cmd", node.Node, "--allow-env", "SKEIN_ACP_MCP_MARK"}
			if kind == "star" {
				args = append(args, filepath.Join(dir, "agent.star"))
			} else {
				args = append(args, "--llm-replay", filepath.Join(dir, "replies.jsonl"), "--llm-replay-mode", "order", filepath.Join(dir, "echo.agent.yaml"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			client, _ := filepath.Abs(filepath.Join(acpNodeDir, "mcp.mjs"))
			cmd := exec.CommandContext(ctx, node.Node, append([]string{client, work, filepath.Join(dir, "servers.json"), "--", bin}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
			}
			var got struct {
				Error      string
				ExitCode   int
				Initialize struct {
					AgentCapabilities struct {
						McpCapabilities struct{ HTTP, SSE bool } `json:"mcpCapabilities"`
					}
				}
				SessionID string
				Turn      acpTurn
				Refused   map[string]struct {
					OK      bool
					Code    int
					Message string
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("client output: %v\n%s", err, out)
			}
			if got.Error != "" || got.ExitCode != 0 {
				t.Fatalf("client failed (agent exit code %d): %s\nstderr: %s", got.ExitCode, got.Error, stderr.String())
			}
			if c := got.Initialize.AgentCapabilities.McpCapabilities; !c.HTTP || c.SSE {
				t.Errorf("mcpCapabilities = %+v, want http and not sse", c)
			}

			// The turn called the server's echo tool.
			turn := got.Turn
			if len(turn.Updates) == 0 {
				t.Fatalf("the turn sent no updates (stop %q)\nstderr: %s", turn.StopReason, stderr.String())
			}
			first := turn.Updates[0]
			if first.SessionUpdate != "tool_call" || first.Title != "echo" || first.RawInput["message"] != "hello from acp" {
				t.Errorf("first update %+v, want the tool_call of echo", first)
			}
			if u, _ := lastStatus(turn.Updates, first.ToolCallID); u.Status != "completed" || u.text() != "Echo: hello from acp" {
				t.Errorf("the echo call ended %q with %q, want completed with the server's result", u.Status, u.text())
			}
			if turn.StopReason != "end_turn" || turn.agentText() != "echoed" {
				t.Errorf("turn: stop %q, reply %q", turn.StopReason, turn.agentText())
			}

			// Each bad list is refused with an error naming its server.
			wants := map[string][]string{
				"fails":      {"session/new: mcp server 'broken'"},
				"notAllowed": {"session/new: mcp server 'shell'", "is not allowed"},
				"sse":        {"session/new: mcpServers[0]: mcp server 'old': the sse transport is not supported"},
				"duplicate":  {"session/new: mcp server 'second' offers tool 'echo' as server 'first' does"},
			}
			for label, want := range wants {
				r := got.Refused[label]
				t.Logf("%s: %d %s", label, r.Code, r.Message)
				for _, w := range want {
					if r.OK || r.Code == 0 || !strings.Contains(r.Message, w) {
						t.Errorf("%s: session/new answered %+v, want a JSON-RPC error with %q", label, r, w)
					}
				}
			}

			// The store holds the one session, with its server's name and
			// the echo result; the refused requests stored nothing.
			exported, err := exec.Command(bin, "sessions", "export", got.SessionID, "--store", db, "--format", "json").Output()
			if err != nil {
				t.Fatalf("export: %v", err)
			}
			var snap struct {
				Metadata map[string]any
				Messages []struct {
					Role    string
					Content any
				}
			}
			json.Unmarshal(exported, &snap)
			acpMeta, _ := snap.Metadata["acp"].(map[string]any)
			if names, _ := acpMeta["mcpServers"].([]any); len(names) != 1 || names[0] != "everything" {
				t.Errorf("metadata.acp = %v, want mcpServers [everything]", acpMeta)
			}
			var tool string
			for _, m := range snap.Messages {
				if m.Role == "tool" {
					tool, _ = m.Content.(string)
				}
			}
			if tool != "Echo: hello from acp" {
				t.Errorf("stored tool result %q", tool)
			}
			list, err := exec.Command(bin, "sessions", "ls", "--store", db, "--json").Output()
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(list, []byte(`"id"`)); n != 1 {
				t.Errorf("sessions ls lists %d sessions, want 1 (the refused session/new stored nothing):\n%s", n, list)
			}

			// No server outlives skein acp.
			if pids := processesWithEnv("SKEIN_ACP_MCP_MARK=" + mark); len(pids) > 0 {
				t.Errorf("MCP server processes still running after the client left: %v", pids)
			}
		})
	}
}

// processesWithEnv returns the pids of the processes whose environment
// holds the entry kv (Linux /proc; none elsewhere).
func processesWithEnv(kv string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == kv {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}
