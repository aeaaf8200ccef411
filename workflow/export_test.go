package workflow

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

func exportRecord() *sessions.Record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	user := func(s string) message.Message { return message.Message{Role: message.RoleUser, Text: s} }
	reply := func(s string) message.Message {
		return message.Message{Role: message.RoleAssistant, Text: s, Model: "m"}
	}
	call := func(id, name string) message.Message {
		return message.Message{Role: message.RoleAssistant, Model: "m",
			ToolCalls: []message.ToolCall{{ID: id, Name: name, Arguments: map[string]any{"x": int64(1), "f": 0.5}}}}
	}
	result := func(id, name string) message.Message {
		return message.Message{Role: message.RoleTool, ToolCallID: id, Name: name, Text: "ok"}
	}
	return &sessions.Record{ID: "0190-abc", Title: "Fix: the {parser}!", Status: sessions.StatusActive, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour),
		Messages: []message.Message{
			{Role: message.RoleSystem, Text: "be brief"},
			user("Why does {task} break?"), call("c1", "read"), result("c1", "read"), call("c2", "grep"), result("c2", "grep"),
			call("c3", "read"), result("c3", "read"),
			{Role: message.RoleAssistant, Model: "m", Blocks: []message.Block{{Type: message.BlockThinking, Thinking: "hmm", Signature: "SIG-secret-ish", Origin: "gemini", Data: "provider-raw"}, {Type: message.BlockText, Text: "Because."}}},
			user("Try it."), call("c4", "run"), result("c4", "run"), // cut short: left out
			user("Thanks."), user("One more:\nwhy?"), reply("Done."),
		}}
}

func TestFromSession(t *testing.T) {
	g, err := FromSession(exportRecord())
	if err != nil {
		t.Fatal(err)
	}
	out := Dump(g)
	if g.Name != "fix-the-parser" || g.Entry != "input" || len(g.Nodes) != 4 {
		t.Fatalf("graph %s entry %s with %d nodes:\n%s", g.Name, g.Entry, len(g.Nodes), out)
	}
	in, n1, n2, outNode := g.Nodes["input"], g.Nodes["turn-1"], g.Nodes["turn-2"], g.Nodes["output"]
	if in.Mode != ModeInput || outNode.Mode != ModeOutput {
		t.Errorf("input %+v, output %+v", in, outNode)
	}
	if n1.Mode != ModeAgent || n1.Prompt != "Why does {{task}} break?" || !reflect.DeepEqual(n1.Tools, []string{"read", "grep"}) ||
		n1.ModelPolicy.SessionID != ExportSession || n1.ModelPolicy.Model != "" || len(n1.Options) != 0 || n1.System != "be brief" {
		t.Errorf("turn-1: %+v", n1)
	}
	if n2.Prompt != "Thanks.\n\nOne more:\nwhy?" || n2.Tools != nil || n2.ModelPolicy.SessionID != ExportSession || n2.System != "be brief" {
		t.Errorf("turn-2: %+v", n2)
	}
	var chain []string
	for _, e := range g.Edges {
		if e.When != "" {
			t.Errorf("edge %s has a condition", e)
		}
		chain = append(chain, e.From+">"+e.To)
	}
	if want := []string{"input>turn-1", "turn-1>turn-2", "turn-2>output"}; !reflect.DeepEqual(chain, want) {
		t.Errorf("edges %v, want %v", chain, want)
	}
	for _, key := range []string{"prompt_template: Why does {{task}} break?", "session_id: \"{run_id}/conversation\"", "mode: input", "mode: output", "agentSlug: null"} {
		if !bytes.Contains(out, []byte(key)) {
			t.Errorf("no %q in the export:\n%s", key, out)
		}
	}
	export, _ := g.Metadata[ExportKey].(map[string]any)
	msgs, _ := export["messages"].([]any)
	if export["source"] != "session" || export["sessionId"] != "0190-abc" || export["title"] != "Fix: the {parser}!" ||
		export["createdAt"] != "2026-01-02T03:04:05Z" || export["updatedAt"] != "2026-01-02T04:04:05Z" || len(msgs) != 15 {
		t.Errorf("metadata.skeinExport: %v", export)
	}
	if _, ok := export["agentSlug"]; !ok || export["agentSlug"] != nil {
		t.Errorf("agentSlug of a session bound to no agent: %v, want null", export["agentSlug"])
	}
	if bytes.Contains(out, []byte("SIG-secret-ish")) || bytes.Contains(out, []byte("provider-raw")) || !bytes.Contains(out, []byte("text: hmm")) {
		t.Errorf("the thinking signature or provider data is exported, or the thinking is not:\n%s", out)
	}
	// The same session gives the same bytes; load then dump gives them too.
	g2, err := FromSession(exportRecord())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Dump(g2), out) {
		t.Error("a second export differs")
	}
	loaded, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse of the export: %v\n%s", err, out)
	}
	if again := Dump(loaded); !bytes.Equal(again, out) {
		t.Errorf("load then dump differs:\n%s\nwant\n%s", again, out)
	}
	if loaded.Fingerprint() != g.Fingerprint() {
		t.Error("load changed the fingerprint")
	}
}

// TestExportSessionMessages: the transcript is kept in the agent-session specification's
// SessionMessage shape.
func TestExportSessionMessages(t *testing.T) {
	rec := exportRecord()
	rec.Messages[1].ID, rec.Messages[1].CreatedAt = "m-2", rec.CreatedAt.Add(time.Second)
	g, err := FromSession(rec)
	if err != nil {
		t.Fatal(err)
	}
	msgs := g.Metadata[ExportKey].(map[string]any)["messages"].([]any)
	want := []map[string]any{
		{"id": "0190-abc:1", "sessionId": "0190-abc", "sequenceNumber": int64(1), "role": "system",
			"content": []any{map[string]any{"type": "text", "text": "be brief"}}},
		{"id": "m-2", "sessionId": "0190-abc", "sequenceNumber": int64(2), "role": "user", "timestamp": "2026-01-02T03:04:06Z",
			"content": []any{map[string]any{"type": "text", "text": "Why does {task} break?"}}},
		{"id": "0190-abc:3", "sessionId": "0190-abc", "sequenceNumber": int64(3), "role": "assistant", "modelId": "m",
			"content": []any{map[string]any{"type": "tool_call", "toolCallId": "c1", "toolName": "read", "input": map[string]any{"f": 0.5, "x": int64(1)}}}},
		{"id": "0190-abc:4", "sessionId": "0190-abc", "sequenceNumber": int64(4), "role": "tool",
			"content": []any{map[string]any{"type": "tool_result", "toolCallId": "c1", "toolName": "read", "output": "ok", "isError": false}}},
	}
	for i, w := range want {
		if !reflect.DeepEqual(msgs[i], w) {
			t.Errorf("message %d:\n got %#v\nwant %#v", i+1, msgs[i], w)
		}
	}
	thinking := msgs[8].(map[string]any)["content"]
	if w := []any{map[string]any{"type": "reasoning", "text": "hmm"}, map[string]any{"type": "text", "text": "Because."}}; !reflect.DeepEqual(thinking, w) {
		t.Errorf("the reply with thinking: %#v", thinking)
	}
}

// TestExportAgentSlug: a session bound to an agent names it.
func TestExportAgentSlug(t *testing.T) {
	rec := exportRecord()
	rec.Metadata = map[string]any{"agent": map[string]any{"name": "reviewer", "model": "openai/gpt-4o-mini"}}
	g, err := FromSession(rec)
	if err != nil {
		t.Fatal(err)
	}
	if slug := g.Metadata[ExportKey].(map[string]any)["agentSlug"]; slug != "reviewer" {
		t.Errorf("agentSlug %v, want reviewer", slug)
	}
}

func TestFromSessionWithoutCompletedTurns(t *testing.T) {
	rec := exportRecord()
	rec.Title = "日本語"
	rec.Messages = rec.Messages[:12] // through the turn cut short
	g, err := FromSession(rec)
	if err != nil || g.Name != "exported-session" || len(g.Nodes) != 3 {
		t.Fatalf("FromSession = %v, %v", g, err)
	}
	rec.Title = "ünïcode"
	rec.Messages = rec.Messages[:2]
	g, err = FromSession(rec)
	if err != nil {
		t.Fatalf("a session without a completed turn: %v", err)
	}
	if g.Name != "ncode" || len(g.Nodes) != 2 || len(g.Edges) != 1 || g.Edges[0].From != "input" || g.Edges[0].To != "output" {
		t.Fatalf("a session without a completed turn exports %s:\n%s", g.Name, Dump(g))
	}
}

// TestPromptKeys: prompt_template is a node's prompt; prompt is still
// read; both at once is an error.
func TestPromptKeys(t *testing.T) {
	for _, key := range []string{"prompt", "prompt_template"} {
		g, err := Decode(map[string]any{"name": "w", "entry": "a", "nodes": map[string]any{"a": map[string]any{"mode": "llm", key: "Say {task}"}}})
		if err != nil || g.Nodes["a"].Prompt != "Say {task}" {
			t.Fatalf("%s: %v", key, err)
		}
	}
	_, err := Decode(map[string]any{"name": "w", "entry": "a", "nodes": map[string]any{"a": map[string]any{"mode": "llm", "prompt": "x", "prompt_template": "y"}}})
	if err == nil || err.Error() != "node 'a': 'prompt' and 'prompt_template' are one key: give one of them" {
		t.Fatalf("both keys: %v", err)
	}
	_, err = Decode(map[string]any{"name": "w", "entry": "a", "nodes": map[string]any{"a": map[string]any{"mode": "input", "prompt": "x"}}})
	if err == nil || err.Error() != "node 'a': 'prompt' is not allowed on an input node (it takes only 'mode')" {
		t.Fatalf("a prompt on an input node: %v", err)
	}
}

// TestFromBoundSession: a session bound to an agent exports the agent's
// snapshot as agents: and agent_ref on every node instead of tools; the
// dump reads back to the same graph.
func TestFromBoundSession(t *testing.T) {
	rec := exportRecord()
	rec.Metadata = map[string]any{"agent": "reviewer", "agent_snapshot": map[string]any{"name": "reviewer", "model": "mock/m", "system": "Review.", "max_iterations": int64(5)}}
	g, err := FromSession(rec)
	if err != nil {
		t.Fatal(err)
	}
	if g.Agents["reviewer"] == nil || g.Agents["reviewer"].Options.Int("max_iterations") != 5 {
		t.Fatalf("agents %v", g.Agents)
	}
	for _, name := range g.Order {
		if !strings.HasPrefix(name, "turn-") {
			continue
		}
		if n := g.Nodes[name]; n.AgentRef != "reviewer" || len(n.Tools) != 0 || n.System != "" {
			t.Errorf("node %s: agent_ref %q tools %v", name, n.AgentRef, n.Tools)
		}
	}
	dump := Dump(g)
	if !bytes.Contains(dump, []byte("agents:\n  - max_iterations: 5\n    model: mock/m\n    name: reviewer\n")) || !bytes.Contains(dump, []byte("    agent_ref: reviewer\n")) {
		t.Errorf("dump:\n%s", dump)
	}
	g2, err := Parse(dump)
	if err != nil || !bytes.Equal(Dump(g2), dump) {
		t.Errorf("round trip: %v", err)
	}
}
