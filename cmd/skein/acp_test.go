package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/nodetest"
)

// acpNodeDir holds the official ACP TypeScript SDK (package.json and
// package-lock.json, installed by .ci/run with npm ci) and the test
// programs written with it.
const acpNodeDir = "../../acp/testdata/node"

// acpAgentScript is the agent the ACP tests serve: a prompt starting
// with "add" calls a tool that succeeds, "break" one that fails, "wait"
// one that sleeps until it is cancelled; anything else gets the mock's
// echo.
const acpAgentScript = `
def add(a, b):
    """Adds two numbers.

    Args:
      a (int): first
      b (int): second
    """
    return a + b

def broken():
    """Always fails."""
    fail("the disk is on fire")

def wait():
    """Waits a long time."""
    sleep(60)
    return "waited"

def handle(session_id, text):
    llm_mock_clear()
    if text.startswith("add"):
        llm_mock(tool_calls = [{"name": "add", "arguments": {"a": 2, "b": 3}}])
        llm_mock(text = "The sum is 5.")
    elif text.startswith("break"):
        llm_mock(tool_calls = [{"name": "broken", "arguments": {}}])
        llm_mock(text = "That failed.")
    elif text.startswith("wait"):
        llm_mock(tool_calls = [{"name": "wait", "arguments": {}}])
        llm_mock(text = "Never said.")
    agent_loop(text, session_id = session_id, tools = [add, broken, wait], provider = "mock")
`

// acpWriterScript is a skein run that leaves session "earlier" in the
// store, for session/load.
const acpWriterScript = `
def lookup(key):
    """Looks a key up.

    Args:
      key (str): the key
    """
    return "value of " + key

s = agent_session_open("earlier")
llm_mock(tool_calls = [{"name": "lookup", "arguments": {"key": "k"}}])
llm_mock(text = "It is the value of k.")
agent_loop("What is k?", session_id = s, tools = [lookup], provider = "mock")
`

// acpUpdate is a session/update's update as the client saw it.
type acpUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Status        string          `json:"status"`
	RawInput      map[string]any  `json:"rawInput"`
	Content       json.RawMessage `json:"content"`
}

// text is the update's text: a chunk's, or a tool call's content's.
func (u acpUpdate) text() string {
	var chunk struct{ Text string }
	if json.Unmarshal(u.Content, &chunk) == nil && chunk.Text != "" {
		return chunk.Text
	}
	var blocks []struct{ Content struct{ Text string } }
	json.Unmarshal(u.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Content.Text)
	}
	return strings.Join(parts, "")
}

// acpTurn is one prompt's updates and stop reason.
type acpTurn struct {
	Updates    []acpUpdate `json:"updates"`
	StopReason string      `json:"stopReason"`
}

// agentText joins the turn's agent_message_chunk texts.
func (t acpTurn) agentText() string {
	var b strings.Builder
	for _, u := range t.Updates {
		if u.SessionUpdate == "agent_message_chunk" {
			b.WriteString(u.text())
		}
	}
	return b.String()
}

// lastOf returns the last update of the turn for tool call id (the
// tool_call or a tool_call_update) with a status.
func lastStatus(updates []acpUpdate, id string) (acpUpdate, bool) {
	var last acpUpdate
	found := false
	for _, u := range updates {
		if u.ToolCallID == id && u.Status != "" {
			last, found = u, true
		}
	}
	return last, found
}

// TestACPAgentWithTheTypeScriptClient drives `skein acp` with a client
// written with the official ACP TypeScript SDK: a session with a tool
// call that completes, one that fails, a turn cancelled mid-tool and a
// turn after it, a prompt to an unknown session, and session/load of a
// session written earlier by skein run. The sessions are in the store
// afterwards, valid, with the client's working directory.
func TestACPAgentWithTheTypeScriptClient(t *testing.T) {
	node := nodetest.Require(t, acpNodeDir)
	bin := skeinBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "sessions.db")
	for name, src := range map[string]string{"agent.star": acpAgentScript, "writer.star": acpWriterScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bin, "run", "--store", db, filepath.Join(dir, "writer.star")).CombinedOutput(); err != nil {
		t.Fatalf("skein run: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, _ := filepath.Abs(filepath.Join(acpNodeDir, "client.mjs"))
	cmd := exec.CommandContext(ctx, node, client, dir, "earlier", "--", bin, "acp", "--store", db, filepath.Join(dir, "agent.star"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var got struct {
		Error      string
		ExitCode   int
		Initialize struct {
			ProtocolVersion   int
			AgentCapabilities struct{ LoadSession bool }
			AgentInfo         struct{ Name, Title string }
		}
		SessionID                     string
		Add, Broken, Cancelled, After acpTurn
		UnknownSession                struct {
			Code    int
			Message string
		}
		Loaded []acpUpdate
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	if got.Error != "" || got.ExitCode != 0 {
		t.Fatalf("client failed (agent exit code %d): %s\nstderr: %s", got.ExitCode, got.Error, stderr.String())
	}
	if in := got.Initialize; in.ProtocolVersion != 1 || !in.AgentCapabilities.LoadSession || in.AgentInfo.Name != "skein" || in.AgentInfo.Title != "agent" {
		t.Errorf("initialize = %+v", in)
	}

	// A tool call that completes: announced with its arguments, then
	// completed with its result; the reply streamed; end_turn.
	if got.Add.StopReason != "end_turn" {
		t.Errorf("add: stop reason %q", got.Add.StopReason)
	}
	first := got.Add.Updates[0]
	if first.SessionUpdate != "tool_call" || first.Title != "add" || first.RawInput["a"] != 2.0 || first.RawInput["b"] != 3.0 {
		t.Errorf("add: first update %+v, want the tool_call of add(a=2, b=3)", first)
	}
	if u, _ := lastStatus(got.Add.Updates, first.ToolCallID); u.Status != "completed" || u.text() != "5" {
		t.Errorf("add: the tool call ended %q with %q, want completed with 5", u.Status, u.text())
	}
	if txt := got.Add.agentText(); txt != "The sum is 5." {
		t.Errorf("add: agent text %q", txt)
	}

	// A tool call that fails.
	call := got.Broken.Updates[0].ToolCallID
	if u, _ := lastStatus(got.Broken.Updates, call); u.Status != "failed" || !strings.Contains(u.text(), "the disk is on fire") {
		t.Errorf("break: the tool call ended %q with %q, want failed with the tool's error", u.Status, u.text())
	}
	if got.Broken.StopReason != "end_turn" || got.Broken.agentText() != "That failed." {
		t.Errorf("break: %q, %q", got.Broken.StopReason, got.Broken.agentText())
	}

	// Cancelled while the tool ran: the call is healed (failed,
	// "cancelled"), the stop reason is cancelled, and the next turn runs.
	if got.Cancelled.StopReason != "cancelled" {
		t.Errorf("wait: stop reason %q, want cancelled", got.Cancelled.StopReason)
	}
	call = got.Cancelled.Updates[0].ToolCallID
	if u, _ := lastStatus(got.Cancelled.Updates, call); u.Status != "failed" || u.text() != "cancelled" {
		t.Errorf("wait: the tool call ended %q with %q, want failed, cancelled", u.Status, u.text())
	}
	if strings.Contains(got.Cancelled.agentText(), "Never said") {
		t.Errorf("wait: the cancelled turn went on to reply")
	}
	if got.After.StopReason != "end_turn" || got.After.agentText() != "Mock response to 2-word prompt: hello again" {
		t.Errorf("after the cancel: %q, %q", got.After.StopReason, got.After.agentText())
	}

	if got.UnknownSession.Code != -32002 || !strings.Contains(got.UnknownSession.Message, "no-such-session") {
		t.Errorf("a prompt to an unknown session got %+v, want the JSON-RPC error -32002 naming it", got.UnknownSession)
	}

	// session/load replays what skein run stored.
	var kinds []string
	for _, u := range got.Loaded {
		kinds = append(kinds, u.SessionUpdate+":"+u.Status+":"+u.text())
	}
	want := []string{"user_message_chunk::What is k?", "tool_call:completed:value of k", "agent_message_chunk::It is the value of k."}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Errorf("session/load replayed\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}

	// The store has the ACP session, valid, active, with the client's cwd.
	exported, err := exec.Command(bin, "sessions", "export", got.SessionID, "--store", db, "--format", "json").Output()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	var snap struct {
		Status   string
		Metadata map[string]map[string]any
		Messages []struct {
			Role    string
			Content any
			IsError bool `json:"is_error"`
		}
		Events []map[string]any
	}
	if err := json.Unmarshal(exported, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Status != "active" || snap.Metadata["acp"]["cwd"] != dir {
		t.Errorf("stored session: status %q, metadata %v", snap.Status, snap.Metadata)
	}
	// session/new started it, with the client's working directory
	if e := snap.Events[0]; e["type"] != "session:started" || fmt.Sprint(e["context"]) != fmt.Sprint(map[string]any{"workingDir": dir}) {
		t.Errorf("first event %v, want session:started with context.workingDir %s", e, dir)
	}
	var roles []string
	for _, m := range snap.Messages {
		r := m.Role
		if m.IsError {
			r += "!"
		}
		roles = append(roles, r)
	}
	wantRoles := "user assistant tool assistant user assistant tool! assistant user assistant tool! user assistant"
	if strings.Join(roles, " ") != wantRoles {
		t.Errorf("stored roles\n%s\nwant\n%s", strings.Join(roles, " "), wantRoles)
	}
	list, err := exec.Command(bin, "sessions", "ls", "--store", db).Output()
	if err != nil || !strings.Contains(string(list), got.SessionID) {
		t.Errorf("sessions ls does not list %s: %v\n%s", got.SessionID, err, list)
	}
}
