// Package message is skein's transcript model: the Message, its content
// Blocks and ToolCalls, their JSON form (the message dict keys scripts
// and exports use), the checks that keep a transcript valid provider
// input (CheckShape, CheckAppend, Validate), the persistent Transcript
// sequence sessions hold, and the Redactor that masks known secrets in
// messages.
//
// It depends on nothing but the standard library and internal/jsonvalue,
// so provider clients (package llm and its providers) use it without
// linking the session store (package sessions) or its backends. Like
// sessions, it never imports Starlark.
package message

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Roles lists the valid message roles in sorted order.
var Roles = []string{RoleAssistant, RoleSystem, RoleTool, RoleUser}

// Content block types.
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockImage            = "image"
)

// BlockTypes lists the content block types in sorted order.
var BlockTypes = []string{BlockImage, BlockRedactedThinking, BlockText, BlockThinking}

// Block is one content block of a message whose content is a list.
// Which fields are meaningful depends on Type:
//
//   - text: Text;
//   - thinking: Thinking (readable reasoning, possibly empty), and the
//     state a provider needs back on the next request: Signature
//     (Anthropic's signature), or Origin naming the wire protocol and
//     Data holding that protocol's opaque reasoning state unchanged
//     (Origin "openai_responses": the reasoning item as JSON; "gemini":
//     the reply's parts as JSON, thought signatures included);
//   - redacted_thinking: Data, Anthropic's encrypted thinking, sent back
//     unchanged;
//   - image: MediaType and Data (base64).
type Block struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Origin    string `json:"origin,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
}

// ToolCall is one tool invocation requested by an assistant message.
// Arguments holds JSON values (see package internal/jsonvalue).
type ToolCall struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// Message is one transcript entry. Messages are immutable once stored:
// code that holds a Message must not modify its slices or maps.
//
// Content is either a plain string (Text, with Blocks nil) or a list of
// blocks (Blocks non-nil; Text unused).
//
// ID and CreatedAt identify a stored message: the store gives every
// message it appends without an ID a new one (a UUIDv7 from its id
// source) and the write's time (see sessions.Store.Apply), and a backend stores
// and returns both unchanged. A message keeps them when a fork shares
// it, a compaction keeps it or a trim leaves it; they are unique among a
// session's messages (a fork shares its parent's ids for the shared
// prefix).
type Message struct {
	ID         string
	CreatedAt  time.Time
	Role       string
	Text       string
	Blocks     []Block
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
	IsError    bool
	Metadata   map[string]any
	Model      string
	Usage      map[string]any
}

// MetaSummary is the key of a message's Metadata that marks the user
// message holding a compaction's summary (value true). The store keeps
// it with the message, and exports carry it, so a session's first prompt
// (and through it a listing's title) is never a summary, however the
// transcript changes later (a trim, a rewind).
const MetaSummary = "compaction_summary"

// IsSummary reports whether m holds a compaction's summary (MetaSummary).
func (m *Message) IsSummary() bool {
	b, _ := m.Metadata[MetaSummary].(bool)
	return b
}

// TextContent returns the message's text: Text for string content, or the
// text blocks joined by newlines for block content. Thinking and image
// blocks are not included.
func (m *Message) TextContent() string {
	if m.Blocks == nil {
		return m.Text
	}
	var parts []string
	for _, b := range m.Blocks {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// HasToolCalls reports whether m is an assistant message that calls tools.
func (m *Message) HasToolCalls() bool {
	return m.Role == RoleAssistant && len(m.ToolCalls) > 0
}

// Keys lists the keys a message dict may have, in sorted order.
// id and created_at are the store's (see Message): snapshots show them,
// and a message dict that carries them may be passed back.
var Keys = []string{"content", "created_at", "id", "is_error", "metadata", "model", "name", "role", "tool_call_id", "tool_calls", "usage"}

// CheckShape validates a message on its own: role, the fields allowed for
// that role, content blocks and tool calls. It does not look at the
// transcript the message would join; see CheckAppend for that.
func CheckShape(m *Message) error {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return fmt.Errorf("message must have a string 'role' (one of: %s)", strings.Join(Roles, ", "))
	}
	for i, b := range m.Blocks {
		if err := checkBlock(b); err != nil {
			return fmt.Errorf("content block %d: %v", i, err)
		}
		if (b.Type == BlockThinking || b.Type == BlockRedactedThinking) && m.Role != RoleAssistant {
			return fmt.Errorf("content block %d: a %s block is only allowed on assistant messages, not %s", i, b.Type, m.Role)
		}
	}
	if m.ToolCalls != nil && len(m.ToolCalls) == 0 {
		return fmt.Errorf("'tool_calls' is an empty list: leave it out, or give at least one call")
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return fmt.Errorf("'tool_calls' is only allowed on assistant messages, not %s", m.Role)
	}
	if err := checkUsage(m.Usage); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, c := range m.ToolCalls {
		if c.ID == "" {
			return fmt.Errorf("tool_calls[%d] must have a non-empty string 'id'", i)
		}
		if c.Name == "" {
			return fmt.Errorf("tool_calls[%d] must have a non-empty string 'name'", i)
		}
		if seen[c.ID] {
			return fmt.Errorf("tool_calls[%d]: duplicate id %q", i, c.ID)
		}
		seen[c.ID] = true
	}
	if m.Role == RoleTool {
		if m.ToolCallID == "" {
			return fmt.Errorf("a tool message must have a string 'tool_call_id'")
		}
	} else {
		if m.ToolCallID != "" {
			return fmt.Errorf("'tool_call_id' is only allowed on tool messages, not %s", m.Role)
		}
		if m.IsError {
			return fmt.Errorf("'is_error' is only allowed on tool messages, not %s", m.Role)
		}
		if m.Name != "" {
			return fmt.Errorf("'name' is only allowed on tool messages, not %s", m.Role)
		}
	}
	if m.Role == RoleUser && (m.Blocks == nil && strings.TrimSpace(m.Text) == "" || m.Blocks != nil && len(m.Blocks) == 0) {
		return fmt.Errorf("a user message needs content: a non-blank string or at least one block")
	}
	return nil
}

func checkBlock(b Block) error {
	switch b.Type {
	case BlockText:
		if b.Thinking != "" || b.Signature != "" || b.Origin != "" || b.MediaType != "" || b.Data != "" {
			return fmt.Errorf("a text block has only 'type' and 'text'")
		}
	case BlockThinking:
		if b.Text != "" || b.MediaType != "" {
			return fmt.Errorf("a thinking block has only 'type', 'thinking', 'signature', 'origin' and 'data'")
		}
		if b.Data != "" && b.Origin == "" {
			return fmt.Errorf("a thinking block with 'data' needs the 'origin' that made it")
		}
	case BlockRedactedThinking:
		if b.Data == "" {
			return fmt.Errorf("a redacted_thinking block needs string 'data'")
		}
		if b.Text != "" || b.Thinking != "" || b.Signature != "" || b.Origin != "" || b.MediaType != "" {
			return fmt.Errorf("a redacted_thinking block has only 'type' and 'data'")
		}
	case BlockImage:
		if b.MediaType == "" || b.Data == "" {
			return fmt.Errorf("an image block needs string 'media_type' and 'data'")
		}
		if b.Text != "" || b.Thinking != "" || b.Signature != "" || b.Origin != "" {
			return fmt.Errorf("an image block has only 'type', 'media_type' and 'data'")
		}
		return checkImage(b)
	default:
		return fmt.Errorf("unknown block type '%s' (expected one of: %s)", quoted(b.Type), strings.Join(BlockTypes, ", "))
	}
	return nil
}

// OpenToolCalls returns the ids of tool calls that still lack results at
// the end of msgs: the calls of the last assistant message when only tool
// messages follow it. The ids are in call order.
func OpenToolCalls(msgs View) []string {
	answered := map[string]bool{}
	for i := msgs.Len() - 1; i >= 0; i-- {
		m := msgs.At(i)
		switch {
		case m.Role == RoleTool:
			answered[m.ToolCallID] = true
		case m.HasToolCalls():
			var open []string
			for _, c := range m.ToolCalls {
				if !answered[c.ID] {
					open = append(open, c.ID)
				}
			}
			return open
		default:
			return nil
		}
	}
	return nil
}

// CheckAppend validates appending m to a transcript whose current messages
// are prefix. It checks m's shape and that the transcript stays valid
// provider input: a tool message must answer an open call of the latest
// assistant message, and no other message may follow an assistant tool call
// until every call has its result.
func CheckAppend(prefix View, m *Message) error {
	if err := CheckShape(m); err != nil {
		return err
	}
	open := OpenToolCalls(prefix)
	if m.Role == RoleTool {
		for _, id := range open {
			if id == m.ToolCallID {
				return nil
			}
		}
		return fmt.Errorf("tool message's tool_call_id %q matches no tool call awaiting a result", m.ToolCallID)
	}
	if len(open) > 0 {
		return fmt.Errorf("tool calls %s have no results yet; a %s message cannot follow them", quoteList(open), m.Role)
	}
	return nil
}

// Validate checks that msgs form valid provider input: every message has a
// valid shape, every tool result directly follows (among the results of)
// the assistant message that called it, and every tool call has its result
// before the next non-tool message. Calls left open at the very end are
// reported too.
func Validate(msgs []Message) error {
	view := Transcript{}
	for i := range msgs {
		if err := CheckAppend(view, &msgs[i]); err != nil {
			return fmt.Errorf("message %d: %v", i, err)
		}
		view = view.Append(msgs[i])
	}
	if open := OpenToolCalls(view); len(open) > 0 {
		return fmt.Errorf("tool calls %s have no results", quoteList(open))
	}
	return nil
}

func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quoted(id)
	}
	return strings.Join(q, ", ")
}

// quoted quotes a name or an id for an error message with single quotes,
// as the rest of skein's errors do, with the escapes of Go's %q inside
// (a control character cannot reach a terminal as it is).
func quoted(s string) string {
	q := strconv.Quote(s)
	return "'" + q[1:len(q)-1] + "'"
}

// checkImage checks an image block's media type (image/SUBTYPE) and that
// its data is standard, padded base64, as every provider wants it.
func checkImage(b Block) error {
	sub, ok := strings.CutPrefix(b.MediaType, "image/")
	if !ok || sub == "" || strings.IndexFunc(sub, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(".+-", r))
	}) >= 0 {
		return fmt.Errorf("an image block's 'media_type' must be an image type such as image/png, not %q", b.MediaType)
	}
	if _, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Data))); err != nil {
		return fmt.Errorf("an image block's 'data' is not base64 (%v)", err)
	}
	return nil
}

// UsageKeys lists the keys of a message's usage, sorted: token counts,
// as llm.Usage.Map writes them.
var UsageKeys = []string{"cache_read_tokens", "cache_write_tokens", "input_tokens", "output_tokens", "reasoning_tokens"}

// checkUsage checks a message's usage: known keys, each an int >= 0.
func checkUsage(usage map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(usage)) {
		if !slices.Contains(UsageKeys, k) {
			return fmt.Errorf("unknown 'usage' key '%s' (expected one of: %s)", k, strings.Join(UsageKeys, ", "))
		}
		switch n, ok := usage[k].(int64); {
		case !ok:
			return fmt.Errorf("'usage' key '%s' must be an int >= 0, got %s", k, jsonvalue.TypeName(usage[k]))
		case n < 0:
			return fmt.Errorf("'usage' key '%s' must be an int >= 0, got %d", k, n)
		}
	}
	return nil
}
