package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
)

// ExportKey is the metadata key under which an exported session keeps its
// transcript.
const ExportKey = "skeinExport"

// FromSession builds the workflow a session exports to: one agent node
// per completed user turn (see sessions.UserTurns: a turn whose replies
// end with assistant text; a turn cut short, or one without user text,
// is left out of the chain), named turn-1, turn-2, ... in order, entry
// turn-1, a linear chain of edges. A node's prompt is the turn's user
// text (its user messages joined by blank lines) with template braces
// doubled; its tools are the names the turn's replies called, in
// first-use order; every node shares one model_policy.session_id, the
// workflow's name. The name is the kebab slug of the session's title
// (sessions.Slug). The whole transcript, thinking signatures removed, is
// kept under metadata.skeinExport = {source: "session", sessionId,
// title, createdAt, updatedAt, messages}. Nothing depends on the clock:
// the same session always gives the same graph, and Dump of it the same
// bytes.
func FromSession(rec *sessions.Record) (*Graph, error) {
	name := sessions.Slug(rec.Title)
	msgs := rec.Messages
	starts := append(sessions.UserTurns(sessions.NewTranscript(msgs)), len(msgs))
	nodes := map[string]any{}
	var edges []any
	prev := ""
	for t := 0; t+1 < len(starts); t++ {
		turn := msgs[starts[t]:starts[t+1]]
		prompt, tools, ok := exportTurn(turn)
		if !ok {
			continue
		}
		id := fmt.Sprintf("turn-%d", len(nodes)+1)
		node := map[string]any{"mode": string(ModeAgent), "prompt": escapeTemplate(prompt),
			"model_policy": map[string]any{"session_id": name}}
		if len(tools) > 0 {
			node["tools"] = tools
		}
		nodes[id] = node
		if prev != "" {
			edges = append(edges, map[string]any{"from": prev, "to": id})
		}
		prev = id
	}
	if len(nodes) == 0 {
		return nil, errors.New("the session has no completed user turn (a user message answered by assistant text) to make a workflow node of")
	}
	transcript, err := exportMessages(msgs)
	if err != nil {
		return nil, err
	}
	export := map[string]any{"source": "session", "sessionId": rec.ID,
		"createdAt": rec.CreatedAt.UTC().Format(sessions.TimeFormat), "updatedAt": rec.UpdatedAt.UTC().Format(sessions.TimeFormat),
		"messages": transcript}
	if rec.Title != "" {
		export["title"] = rec.Title
	}
	spec := map[string]any{"name": name, "entry": "turn-1", "nodes": nodes, "metadata": map[string]any{ExportKey: export}}
	if len(edges) > 0 {
		spec["edges"] = edges
	}
	return Decode(spec)
}

// exportTurn returns a turn's prompt and the tools its replies called,
// and whether it is completed: its last message is an assistant reply
// with text and no tool calls, and it has user text.
func exportTurn(turn []sessions.Message) (string, []any, bool) {
	last := &turn[len(turn)-1]
	if last.Role != sessions.RoleAssistant || last.HasToolCalls() || strings.TrimSpace(last.TextContent()) == "" {
		return "", nil, false
	}
	var texts []string
	var tools []any
	seen := map[string]bool{}
	for i := range turn {
		m := &turn[i]
		if m.Role == sessions.RoleUser {
			if t := m.TextContent(); strings.TrimSpace(t) != "" {
				texts = append(texts, t)
			}
		}
		for _, c := range m.ToolCalls {
			if !seen[c.Name] {
				seen[c.Name] = true
				tools = append(tools, c.Name)
			}
		}
	}
	if len(texts) == 0 {
		return "", nil, false
	}
	return strings.Join(texts, "\n\n"), tools, true
}

// escapeTemplate doubles the braces of s so that a prompt template
// renders it as it is.
func escapeTemplate(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// exportMessages returns msgs as JSON values in the message dict form,
// without thinking signatures.
func exportMessages(msgs []sessions.Message) ([]any, error) {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		if m.Blocks != nil {
			blocks := make([]sessions.Block, len(m.Blocks))
			for j, b := range m.Blocks {
				b.Signature = ""
				blocks[j] = b
			}
			m.Blocks = blocks
		}
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %v", i, err)
		}
		if out[i], err = jsonvalue.Decode(data); err != nil {
			return nil, fmt.Errorf("message %d: %v", i, err)
		}
	}
	return out, nil
}
