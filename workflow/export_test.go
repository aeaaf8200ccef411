package workflow

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

func exportRecord() *sessions.Record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	user := func(s string) sessions.Message { return sessions.Message{Role: sessions.RoleUser, Text: s} }
	reply := func(s string) sessions.Message {
		return sessions.Message{Role: sessions.RoleAssistant, Text: s, Model: "m"}
	}
	call := func(id, name string) sessions.Message {
		return sessions.Message{Role: sessions.RoleAssistant, Model: "m",
			ToolCalls: []sessions.ToolCall{{ID: id, Name: name, Arguments: map[string]any{"x": int64(1), "f": 0.5}}}}
	}
	result := func(id, name string) sessions.Message {
		return sessions.Message{Role: sessions.RoleTool, ToolCallID: id, Name: name, Text: "ok"}
	}
	return &sessions.Record{ID: "0190-abc", Title: "Fix: the {parser}!", Status: sessions.StatusActive, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour),
		Messages: []sessions.Message{
			{Role: sessions.RoleSystem, Text: "be brief"},
			user("Why does {task} break?"), call("c1", "read"), result("c1", "read"), call("c2", "grep"), result("c2", "grep"),
			call("c3", "read"), result("c3", "read"),
			{Role: sessions.RoleAssistant, Model: "m", Blocks: []sessions.Block{{Type: sessions.BlockThinking, Thinking: "hmm", Signature: "SIG-secret-ish"}, {Type: sessions.BlockText, Text: "Because."}}},
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
	if g.Name != "fix-the-parser" || g.Entry != "turn-1" || len(g.Nodes) != 2 {
		t.Fatalf("graph %s entry %s with %d nodes:\n%s", g.Name, g.Entry, len(g.Nodes), out)
	}
	n1, n2 := g.Nodes["turn-1"], g.Nodes["turn-2"]
	if n1.Mode != ModeAgent || n1.Prompt != "Why does {{task}} break?" || !reflect.DeepEqual(n1.Tools, []string{"read", "grep"}) ||
		n1.ModelPolicy.SessionID != "fix-the-parser" || n1.ModelPolicy.Model != "" || len(n1.Options) != 0 {
		t.Errorf("turn-1: %+v", n1)
	}
	if n2.Prompt != "Thanks.\n\nOne more:\nwhy?" || n2.Tools != nil || n2.ModelPolicy.SessionID != "fix-the-parser" {
		t.Errorf("turn-2: %+v", n2)
	}
	if len(g.Edges) != 1 || g.Edges[0].From != "turn-1" || g.Edges[0].To != "turn-2" || g.Edges[0].When != "" {
		t.Errorf("edges: %+v", g.Edges)
	}
	export, _ := g.Metadata[ExportKey].(map[string]any)
	msgs, _ := export["messages"].([]any)
	if export["source"] != "session" || export["sessionId"] != "0190-abc" || export["title"] != "Fix: the {parser}!" ||
		export["createdAt"] != "2026-01-02T03:04:05Z" || export["updatedAt"] != "2026-01-02T04:04:05Z" || len(msgs) != 15 {
		t.Errorf("metadata.skeinExport: %v", export)
	}
	if bytes.Contains(out, []byte("SIG-secret-ish")) || !bytes.Contains(out, []byte("thinking: hmm")) {
		t.Errorf("the thinking signature is exported, or the thinking is not:\n%s", out)
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

func TestFromSessionWithoutCompletedTurns(t *testing.T) {
	rec := exportRecord()
	rec.Title = "日本語"
	rec.Messages = rec.Messages[:12] // through the turn cut short
	g, err := FromSession(rec)
	if err != nil || g.Name != "exported-session" || len(g.Nodes) != 1 {
		t.Fatalf("FromSession = %v, %v", g, err)
	}
	rec.Messages = rec.Messages[:2]
	if _, err := FromSession(rec); err == nil || !strings.Contains(err.Error(), "no completed user turn") {
		t.Fatalf("a session without a completed turn: %v", err)
	}
}
