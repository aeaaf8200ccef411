package workflow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// ExportKey is the metadata key under which an exported session keeps its
// transcript.
const ExportKey = "skeinExport"

// ExportSession is the model_policy.session_id of an exported workflow's
// agent nodes: one session per run ({run_id} is the run's id), shared by
// the run's turns, so a second run starts a new conversation.
const ExportSession = "{run_id}/conversation"

// FromSession builds the workflow a session exports to, by the
// agent-session specification's mapping: an input node, then one agent
// node per completed user turn (see sessions.UserTurns: a turn whose
// replies end with assistant text; a turn cut short, or one without user
// text, is left out of the chain) named turn-1, turn-2, ... in order, then an output node, linked in a
// chain input -> turn-1 -> ... -> output (input -> output when no turn
// completed), entry input. A turn node's prompt_template is the turn's
// user text (its user messages joined by blank lines) with template
// braces doubled; its tools are the names the turn's replies called, in
// first-use order; its system is the session's system prompt (its
// leading system messages); every turn node shares the run's session
// (ExportSession). The name is the kebab slug of the session's title
// (sessions.Slug). The whole transcript is kept under
// metadata.skeinExport = {source: "session", sessionId, agentSlug,
// title, createdAt, updatedAt, messages}, its messages in the
// specification's SessionMessage shape (exportMessages), without thinking
// signatures.
// Nothing depends on the clock: the same session always gives the same
// graph, and Dump of it the same bytes.
func FromSession(rec *sessions.Record) (*Graph, error) {
	name := sessions.Slug(rec.Title)
	msgs := rec.Messages
	system := systemPrompt(msgs)
	starts := append(sessions.UserTurns(message.NewTranscript(msgs)), len(msgs))
	nodes := map[string]any{"input": map[string]any{"mode": string(ModeInput)}, "output": map[string]any{"mode": string(ModeOutput)}}
	var edges []any
	prev := "input"
	turns := 0
	// a session bound to an agent exports the agent (its frozen
	// snapshot) and nodes that run it
	snapshot, _ := rec.Metadata[agent.MetadataSnapshot].(map[string]any)
	ref, _ := snapshot["name"].(string)
	for t := 0; t+1 < len(starts); t++ {
		turn := msgs[starts[t]:starts[t+1]]
		prompt, tools, ok := exportTurn(turn)
		if !ok {
			continue
		}
		turns++
		id := fmt.Sprintf("turn-%d", turns)
		node := map[string]any{"mode": string(ModeAgent), "prompt_template": escapeTemplate(prompt),
			"model_policy": map[string]any{"session_id": ExportSession}}
		if ref != "" {
			node["agent_ref"] = ref
		} else if len(tools) > 0 {
			node["tools"] = tools
		}
		if system != "" && ref == "" {
			node["system"] = system
		}
		nodes[id] = node
		edges = append(edges, map[string]any{"from": prev, "to": id})
		prev = id
	}
	edges = append(edges, map[string]any{"from": prev, "to": "output"})
	transcript, err := exportMessages(rec.ID, msgs)
	if err != nil {
		return nil, err
	}
	export := map[string]any{"source": "session", "sessionId": rec.ID, "agentSlug": agentSlug(rec),
		"createdAt": rec.CreatedAt.UTC().Format(sessions.TimeFormat), "updatedAt": rec.UpdatedAt.UTC().Format(sessions.TimeFormat),
		"messages": transcript}
	if rec.Title != "" {
		export["title"] = rec.Title
	}
	spec := map[string]any{"name": name, "entry": "input", "nodes": nodes, "edges": edges, "metadata": map[string]any{ExportKey: export}}
	if ref != "" {
		spec["agents"] = []any{snapshot}
	}
	return Decode(spec)
}

// agentSlug is the name of the agent a session is bound to (its
// metadata's "agent": a name, or a snapshot with a name), or nil for a
// session bound to none.
func agentSlug(rec *sessions.Record) any {
	switch a := rec.Metadata["agent"].(type) {
	case string:
		if a != "" {
			return a
		}
	case map[string]any:
		if n, ok := a["name"].(string); ok && n != "" {
			return n
		}
	}
	return nil
}

// systemPrompt is the text of a transcript's leading system messages,
// joined by blank lines: the system prompt its turns ran with.
func systemPrompt(msgs []message.Message) string {
	var texts []string
	for i := range msgs {
		if msgs[i].Role != message.RoleSystem {
			break
		}
		if t := msgs[i].TextContent(); strings.TrimSpace(t) != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n\n")
}

// exportTurn returns a turn's prompt and the tools its replies called,
// and whether it is completed: its last message is an assistant reply
// with text and no tool calls, and it has user text.
func exportTurn(turn []message.Message) (string, []any, bool) {
	last := &turn[len(turn)-1]
	if last.Role != message.RoleAssistant || last.HasToolCalls() || strings.TrimSpace(last.TextContent()) == "" {
		return "", nil, false
	}
	var texts []string
	var tools []any
	seen := map[string]bool{}
	for i := range turn {
		m := &turn[i]
		if m.Role == message.RoleUser {
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

// exportMessages returns msgs in the agent-session specification's
// SessionMessage shape: {id, sessionId, sequenceNumber (from 1), role,
// content, timestamp, modelId (assistant messages that name their
// model)}, content a list of parts:
//
//	{type: "text", text}
//	{type: "image", mediaType, data}
//	{type: "reasoning", text}                      (no signature, no provider data)
//	{type: "tool_call", toolCallId, toolName, input}
//	{type: "tool_result", toolCallId, toolName, output, isError}
//
// A message without a stored id gets "<sessionId>:<sequenceNumber>"; one
// without a time gets none.
func exportMessages(sessionID string, msgs []message.Message) ([]any, error) {
	out := make([]any, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		seq := i + 1
		id := m.ID
		if id == "" {
			id = fmt.Sprintf("%s:%d", sessionID, seq)
		}
		var content []any
		if m.Role == message.RoleTool {
			content = append(content, map[string]any{"type": "tool_result", "toolCallId": m.ToolCallID, "toolName": m.Name,
				"output": m.TextContent(), "isError": m.IsError})
		} else {
			content = contentParts(m)
		}
		for _, c := range m.ToolCalls {
			args, err := json.Marshal(c.Arguments)
			if err != nil {
				return nil, fmt.Errorf("message %d: tool call %s: %v", seq, c.ID, err)
			}
			input, err := jsonvalue.Decode(args)
			if err != nil {
				return nil, fmt.Errorf("message %d: tool call %s: %v", seq, c.ID, err)
			}
			content = append(content, map[string]any{"type": "tool_call", "toolCallId": c.ID, "toolName": c.Name, "input": input})
		}
		if content == nil {
			content = []any{}
		}
		sm := map[string]any{"id": id, "sessionId": sessionID, "sequenceNumber": int64(seq), "role": m.Role, "content": content}
		if !m.CreatedAt.IsZero() {
			sm["timestamp"] = m.CreatedAt.UTC().Format(sessions.TimeFormat)
		}
		if m.Model != "" {
			sm["modelId"] = m.Model
		}
		out[i] = sm
	}
	return out, nil
}

// contentParts returns the parts of a user, assistant or system message.
func contentParts(m *message.Message) []any {
	if m.Blocks == nil {
		if m.Text == "" {
			return nil
		}
		return []any{map[string]any{"type": "text", "text": m.Text}}
	}
	var parts []any
	for _, b := range m.Blocks {
		switch b.Type {
		case message.BlockText:
			parts = append(parts, map[string]any{"type": "text", "text": b.Text})
		case message.BlockImage:
			parts = append(parts, map[string]any{"type": "image", "mediaType": b.MediaType, "data": b.Data})
		case message.BlockThinking:
			if b.Thinking != "" {
				parts = append(parts, map[string]any{"type": "reasoning", "text": b.Thinking})
			}
		}
	}
	return parts
}
