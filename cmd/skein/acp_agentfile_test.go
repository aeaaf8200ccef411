package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/nodetest"
)

// TestACPAgentFileAsksApproval serves an agent file with `skein acp`:
// session/new binds the session to the agent with the client's cwd as
// its working directory, and a call of a tool the agent lists in
// approve asks the client (session/request_permission): allowed, the
// command runs; rejected or cancelled, the call fails "not approved".
func TestACPAgentFileAsksApproval(t *testing.T) {
	node := nodetest.Require(t, acpNodeDir)
	bin := skeinBinary(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "project")
	os.MkdirAll(work, 0o755)
	call := `{"tool_calls": [{"name": "run_command", "arguments": {"argv": ["echo", "approved run"]}}]}`
	files := map[string]string{
		"helper.agent.yaml": "model: mock/helper\nsystem: You work in {{ctx.workingDir}}.\ntools: [run_command]\napprove: [run_command]\n",
		"replies.jsonl":     call + "\n" + `{"text": "ran it"}` + "\n" + call + "\n" + `{"text": "refused"}` + "\n" + call + "\n" + `{"text": "cancelled"}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, _ := filepath.Abs(filepath.Join(acpNodeDir, "approve.mjs"))
	db := filepath.Join(dir, "sessions.db")
	cmd := exec.CommandContext(ctx, node, client, work, "allow", "reject", "cancel", "--",
		bin, "acp", "--store", db, "--workspace", dir, "--allow-cmd", "echo",
		"--llm-replay", filepath.Join(dir, "replies.jsonl"), "--llm-replay-mode", "order", filepath.Join(dir, "helper.agent.yaml"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Error     string
		ExitCode  int
		SessionID string
		Turns     []acpTurn
		Asked     []struct {
			ToolCall struct {
				ToolCallID string `json:"toolCallId"`
				Title      string
				RawInput   map[string]any `json:"rawInput"`
			} `json:"toolCall"`
			Options []string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	if got.Error != "" || got.ExitCode != 0 || len(got.Turns) != 3 || len(got.Asked) != 3 {
		t.Fatalf("client: %+v\nstderr: %s", got, stderr.String())
	}
	for i, a := range got.Asked {
		if a.ToolCall.Title != "run_command" || a.ToolCall.ToolCallID != got.Turns[i].Updates[0].ToolCallID || len(a.Options) != 3 {
			t.Errorf("permission request %d: %+v (turn's first update %+v)", i, a, got.Turns[i].Updates[0])
		}
	}
	wants := []struct{ status, text, reply string }{
		{"completed", "approved run", "ran it"},
		{"failed", "not approved", "refused"},
		{"failed", "not approved", "cancelled"},
	}
	for i, w := range wants {
		turn := got.Turns[i]
		u, _ := lastStatus(turn.Updates, turn.Updates[0].ToolCallID)
		if turn.StopReason != "end_turn" || u.Status != w.status || !strings.Contains(u.text(), w.text) || turn.agentText() != w.reply {
			t.Errorf("turn %d: stop %q, call %q %q, reply %q; want %+v", i, turn.StopReason, u.Status, u.text(), turn.agentText(), w)
		}
	}
	exported, err := exec.Command(bin, "sessions", "export", got.SessionID, "--store", db, "--format", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var snap struct{ Metadata map[string]any }
	json.Unmarshal(exported, &snap)
	sc, _ := snap.Metadata["session_context"].(map[string]any)
	if snap.Metadata["agent"] != "helper" || sc["workingDir"] != work {
		t.Errorf("the session is not bound with the client's cwd: %v", snap.Metadata)
	}
}
