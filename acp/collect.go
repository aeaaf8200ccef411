package acp

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// maxToolName bounds the name a tool message gets from an ACP tool
// call's title (a sentence such as "Reading src/main.go").
const maxToolName = 200

// collector stores what an external agent streams during one prompt as
// the session's messages, keeping the transcript valid at every step:
//
//   - text chunks (and thought chunks) gather in a draft assistant
//     message, published live as text_delta events;
//   - a tool call stores the draft with the call at once (a viewer sees
//     the call while it runs), unless calls stored earlier still wait
//     for results: then it joins the next draft, stored once they are
//     in;
//   - a call's result (a tool_call_update with status completed or
//     failed) is stored as a tool message after its call;
//   - at the end of the turn the draft is stored and calls left without
//     a result are healed.
//
// Its methods run on the connection's notification goroutine, one at a
// time, in the order the agent sent the updates.
type collector struct {
	ctx   context.Context // writes are not cancelled with the turn
	store *sessions.Store
	id    string

	draft   *draft
	open    map[string]bool // stored calls without results
	names   map[string]string
	lastSeq int64 // the newest stored event, for transient events' seq
	err     error // the first failed write
}

// draft is an assistant message not stored yet, with the results of its
// calls that came before it could be stored.
type draft struct {
	text     strings.Builder
	thinking strings.Builder
	calls    []message.ToolCall
	held     []message.Message
}

func newCollector(ctx context.Context, store *sessions.Store, id string, lastSeq int64) *collector {
	return &collector{ctx: ctx, store: store, id: id, open: map[string]bool{}, names: map[string]string{}, lastSeq: lastSeq}
}

func (c *collector) cur() *draft {
	if c.draft == nil {
		c.draft = &draft{}
	}
	return c.draft
}

// update takes one session/update of the turn.
func (c *collector) update(u sdk.SessionUpdate) {
	switch {
	case u.AgentMessageChunk != nil:
		if t := blockText(u.AgentMessageChunk.Content); t != "" {
			c.cur().text.WriteString(t)
			c.store.Publish(sessions.Event{Type: agent.EventTextDelta, SessionID: c.id, Seq: c.lastSeq, Time: c.store.Now(), Data: map[string]any{"text": t}})
		}
	case u.AgentThoughtChunk != nil:
		c.cur().thinking.WriteString(blockText(u.AgentThoughtChunk.Content))
	case u.ToolCall != nil:
		tc := u.ToolCall
		c.call(string(tc.ToolCallId), tc.Title, tc.Kind, tc.RawInput)
		c.status(string(tc.ToolCallId), tc.Status, tc.Content, tc.RawOutput)
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		id := string(tu.ToolCallId)
		if _, known := c.names[id]; !known && tu.Title != nil {
			// an update with a title announces a call the agent did not
			// start with tool_call; one without is about nothing known
			var kind sdk.ToolKind
			if tu.Kind != nil {
				kind = *tu.Kind
			}
			c.call(id, *tu.Title, kind, tu.RawInput)
		}
		if tu.Status != nil {
			c.status(id, *tu.Status, tu.Content, tu.RawOutput)
		}
	}
}

// call adds a tool call to the draft.
func (c *collector) call(id, title string, kind sdk.ToolKind, input any) {
	if _, known := c.names[id]; known || id == "" {
		return
	}
	name := strings.TrimSpace(title)
	if name == "" {
		name = string(kind)
	}
	if name == "" {
		name = "tool"
	}
	if len(name) > maxToolName {
		name = name[:maxToolName]
	}
	c.names[id] = name
	c.cur().calls = append(c.cur().calls, message.ToolCall{ID: id, Name: name, Arguments: toolArguments(input)})
	c.flush()
}

// status records a call's final status (completed or failed) as its
// result; other statuses change nothing stored.
func (c *collector) status(id string, st sdk.ToolCallStatus, content []sdk.ToolCallContent, output any) {
	if st != sdk.ToolCallStatusCompleted && st != sdk.ToolCallStatusFailed {
		return
	}
	if _, known := c.names[id]; !known {
		return
	}
	m := message.Message{Role: message.RoleTool, ToolCallID: id, Name: c.names[id], Text: toolText(content, output), IsError: st == sdk.ToolCallStatusFailed}
	switch {
	case c.open[id]:
		delete(c.open, id)
		c.append(m)
		c.flush()
	case c.draft != nil && c.draft.has(id) && !c.draft.holds(id):
		c.draft.held = append(c.draft.held, m)
		c.flush()
	}
}

func (d *draft) has(id string) bool {
	for _, call := range d.calls {
		if call.ID == id {
			return true
		}
	}
	return false
}

func (d *draft) holds(id string) bool {
	for _, m := range d.held {
		if m.ToolCallID == id {
			return true
		}
	}
	return false
}

// flush stores a draft that calls tools once no stored call waits for
// its result.
func (c *collector) flush() {
	if c.draft == nil || len(c.draft.calls) == 0 || len(c.open) > 0 {
		return
	}
	c.store1()
}

// store1 stores the draft (when it has anything) and the results it
// holds.
func (c *collector) store1() {
	d := c.draft
	c.draft = nil
	if d == nil {
		return
	}
	m := message.Message{Role: message.RoleAssistant, Text: d.text.String(), ToolCalls: d.calls}
	if th := d.thinking.String(); th != "" {
		m.Blocks = []message.Block{{Type: message.BlockThinking, Thinking: th}}
		if m.Text != "" {
			m.Blocks = append(m.Blocks, message.Block{Type: message.BlockText, Text: m.Text})
		}
		m.Text = ""
	}
	if m.Text == "" && m.Blocks == nil && len(m.ToolCalls) == 0 {
		return
	}
	c.append(m)
	for _, call := range d.calls {
		c.open[call.ID] = true
	}
	for _, r := range d.held {
		delete(c.open, r.ToolCallID)
		c.append(r)
	}
}

// finish stores what is left at the end of the turn, healing the calls
// left without results with reason (cancelled, interrupted).
func (c *collector) finish(reason string) error {
	if len(c.open) > 0 {
		c.heal(reason)
	}
	c.store1()
	if len(c.open) > 0 {
		c.heal(reason)
	}
	return c.err
}

func (c *collector) heal(reason string) {
	if err := c.store.Heal(c.ctx, c.id, reason); err != nil && c.err == nil {
		c.err = err
	}
	c.open = map[string]bool{}
}

// append stores one message.
func (c *collector) append(m message.Message) {
	if c.err != nil {
		return
	}
	events, err := c.store.Apply(c.ctx, c.id, &sessions.Change{Append: []message.Message{m}})
	if err != nil {
		c.err = err
		return
	}
	if n := len(events); n > 0 {
		c.lastSeq = events[n-1].Seq
	}
}

// blockText is the text of a content block: its text, a resource
// link's URI, an embedded text resource's text.
func blockText(b sdk.ContentBlock) string {
	switch {
	case b.Text != nil:
		return b.Text.Text
	case b.ResourceLink != nil:
		return "[" + b.ResourceLink.Name + "](" + b.ResourceLink.Uri + ")"
	case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
		return b.Resource.Resource.TextResourceContents.Text
	}
	return ""
}

// toolText is a tool call's result as text: its content's text, a diff
// as its path and new text, a terminal as its id; without content, the
// raw output as JSON.
func toolText(content []sdk.ToolCallContent, output any) string {
	var parts []string
	for _, c := range content {
		switch {
		case c.Content != nil:
			if t := blockText(c.Content.Content); t != "" {
				parts = append(parts, t)
			}
		case c.Diff != nil:
			parts = append(parts, "diff of "+c.Diff.Path+":\n"+c.Diff.NewText)
		case c.Terminal != nil:
			parts = append(parts, "terminal "+c.Terminal.TerminalId)
		}
	}
	if len(parts) == 0 && output != nil {
		if b, err := json.Marshal(output); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// toolArguments converts a tool call's raw input (decoded JSON) to the
// arguments of a stored tool call: the object itself, any other value
// as {"input": value}.
func toolArguments(v any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	val, err := jsonvalue.Decode(b)
	if err != nil {
		return map[string]any{}
	}
	if m, ok := val.(map[string]any); ok {
		return m
	}
	return map[string]any{"input": val}
}
