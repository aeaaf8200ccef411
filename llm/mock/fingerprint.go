package mock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// Strict replay. A recorded fixture line keeps, under its `request` key,
// the request it answered: provider, model, system prompt, messages and
// tools in a normalised form, and a fingerprint of the last four. Replay
// compares the fingerprint of each request with the next recorded entry's
// and fails with a readable diff when they differ, so a changed prompt,
// tool or model cannot pass on an old recording.
//
// The normal form leaves out what a faithful replay cannot reproduce:
// tool call ids (a real provider's "call_8f3a" comes back as
// "mock_call_1"; ids are numbered in order of appearance instead),
// thinking blocks and their signatures, message metadata, usage and the
// model that answered.

// Recorded is what a fixture line says about the request it answered.
type Recorded struct {
	Provider    string
	Model       string
	Fingerprint string         // "" for hand-written or old lines: not checked
	Shape       map[string]any // the normalised request, for diffs
}

// RequestShape is the normalised form of req that strict replay compares:
// {model, system, messages, tools}, and output_schema when the request
// asks for structured output.
func RequestShape(req *llm.Request) map[string]any {
	ids := map[string]string{}
	norm := func(id string) string {
		if id == "" {
			return ""
		}
		if n, ok := ids[id]; ok {
			return n
		}
		n := fmt.Sprintf("call_%d", len(ids)+1)
		ids[id] = n
		return n
	}
	msgs := make([]any, 0, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		out := map[string]any{"role": m.Role}
		out["content"] = contentShape(m)
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args := c.Arguments
				if args == nil {
					args = map[string]any{}
				}
				calls[j] = map[string]any{"id": norm(c.ID), "name": c.Name, "arguments": args}
			}
			out["tool_calls"] = calls
		}
		if m.ToolCallID != "" {
			out["tool_call_id"] = norm(m.ToolCallID)
		}
		if m.Name != "" {
			out["name"] = m.Name
		}
		if m.IsError {
			out["is_error"] = true
		}
		msgs = append(msgs, out)
	}
	tools := make([]any, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}
	}
	shape := map[string]any{"model": req.Model, "system": req.System, "messages": msgs, "tools": tools}
	if req.Output != nil {
		shape["output_schema"] = req.Output.Schema
	}
	return shape
}

// Fingerprint is a short hash of a request shape (RequestShape), stable
// across processes: the canonical JSON of the shape (keys sorted).
func Fingerprint(shape map[string]any) string {
	fields := map[string]any{"model": shape["model"], "system": shape["system"], "messages": shape["messages"], "tools": shape["tools"]}
	if s, ok := shape["output_schema"]; ok {
		// only when present: fingerprints of requests without it are
		// those recorded before it existed
		fields["output_schema"] = s
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// parseRecorded reads a fixture line's `request` value. Old and
// hand-written lines ({provider, model, prompt}, or none) give a Recorded
// without a fingerprint.
func parseRecorded(v any) (*Recorded, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("'request' must be a dict, got %s", jsonvalue.TypeName(v))
	}
	r := &Recorded{}
	r.Provider, _ = m["provider"].(string)
	r.Model, _ = m["model"].(string)
	if fp, ok := m["fingerprint"].(string); ok {
		r.Fingerprint = fp
		r.Shape = m
	}
	return r, nil
}

// requestDiff describes how actual differs from the recorded shape, one
// line per difference, messages and tools by position and name.
func requestDiff(recorded, actual map[string]any) []string {
	var out []string
	for _, k := range []string{"model", "system", "output_schema"} {
		a, b := fmt.Sprint(recorded[k]), fmt.Sprint(actual[k])
		if a != b {
			out = append(out, changed(k, a, b))
		}
	}
	out = append(out, toolsDiff(list(recorded["tools"]), list(actual["tools"]))...)
	out = append(out, messagesDiff(list(recorded["messages"]), list(actual["messages"]))...)
	if len(out) == 0 {
		out = append(out, "the requests differ in a detail the diff does not show")
	}
	return out
}

func toolsDiff(recorded, actual []any) []string {
	byName := func(l []any) (map[string]string, []string) {
		m := map[string]string{}
		var names []string
		for _, t := range l {
			tm, _ := t.(map[string]any)
			name, _ := tm["name"].(string)
			m[name] = canonical(tm)
			names = append(names, name)
		}
		return m, names
	}
	rec, recNames := byName(recorded)
	act, actNames := byName(actual)
	var out []string
	for _, n := range recNames {
		if _, ok := act[n]; !ok {
			out = append(out, fmt.Sprintf("tool %s was offered when recorded, not now", n))
		} else if act[n] != rec[n] {
			out = append(out, changed("tool "+n, rec[n], act[n]))
		}
	}
	for _, n := range actNames {
		if _, ok := rec[n]; !ok {
			out = append(out, fmt.Sprintf("tool %s is offered now, not when recorded", n))
		}
	}
	return out
}

func messagesDiff(recorded, actual []any) []string {
	var out []string
	n := max(len(recorded), len(actual))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(recorded):
			out = append(out, fmt.Sprintf("message %d is new: %s", i+1, clip(canonical(actual[i]))))
		case i >= len(actual):
			out = append(out, fmt.Sprintf("message %d is gone: %s", i+1, clip(canonical(recorded[i]))))
		default:
			a, b := canonical(recorded[i]), canonical(actual[i])
			if a != b {
				role, _ := actual[i].(map[string]any)["role"].(string)
				out = append(out, changed(fmt.Sprintf("message %d (%s)", i+1, role), a, b))
			}
		}
		if len(out) >= 5 {
			out = append(out, "...")
			break
		}
	}
	if len(recorded) != len(actual) {
		out = append([]string{fmt.Sprintf("%d messages now, %d when recorded", len(actual), len(recorded))}, out...)
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func canonical(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// clip shortens s for a diff line.
func clip(s string) string {
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "..."
	}
	return strings.ReplaceAll(s, "\n", `\n`)
}

// clipPair shortens two differing texts around their first difference.
func clipPair(a, b string) (string, string) {
	ra, rb := []rune(a), []rune(b)
	p := 0
	for p < len(ra) && p < len(rb) && ra[p] == rb[p] {
		p++
	}
	from := max(0, p-80)
	cut := func(r []rune) string {
		s := string(r[from:min(len(r), from+300)])
		if from > 0 {
			s = "..." + s
		}
		if from+300 < len(r) {
			s += "..."
		}
		return strings.ReplaceAll(s, "\n", `\n`)
	}
	return cut(ra), cut(rb)
}

// changed renders one changed item as "what changed:" and the old and new
// text around their first difference.
func changed(what, old, new string) string {
	a, b := clipPair(old, new)
	return fmt.Sprintf("%s changed:\n      - %s\n      + %s", what, a, b)
}

// contentShape is a message's content as strict replay compares it.
// Thinking is left out (a replay cannot reproduce a provider's thinking,
// nor its signatures), so content that is only text, once thinking is
// left out, is its text, whether it was written as a string or as blocks.
func contentShape(m *message.Message) any {
	if m.Blocks == nil {
		return m.Text
	}
	blocks := []any{}
	onlyText := true
	for _, b := range m.Blocks {
		switch b.Type {
		case message.BlockThinking, message.BlockRedactedThinking:
			continue
		case message.BlockImage:
			sum := sha256.Sum256([]byte(b.Data))
			blocks = append(blocks, map[string]any{"type": b.Type, "media_type": b.MediaType, "sha256": hex.EncodeToString(sum[:8])})
			onlyText = false
		default:
			blocks = append(blocks, map[string]any{"type": b.Type, "text": b.Text})
		}
	}
	if onlyText {
		return m.TextContent()
	}
	return blocks
}
