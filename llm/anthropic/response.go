package anthropic

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// A reply message: the non-streamed body, or the message of a stream's
// message_start event (with empty content).
type replyMessage struct {
	Type       string          `json:"type"`
	Model      string          `json:"model"`
	Content    []contentBlock  `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      *usage          `json:"usage"`
	Error      json.RawMessage `json:"error"`
}

// contentBlock is a block of a reply, or the start of a streamed one.
// Block types other than text, thinking, redacted_thinking and tool_use
// are ignored.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// usage counts tokens; a stream's message_delta repeats the counts that
// changed, cumulatively, so absent fields keep their earlier values.
type usage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// streamEvent is the data of any stream event; which fields are set
// depends on Type.
type streamEvent struct {
	Type         string          `json:"type"`
	Message      *replyMessage   `json:"message"`       // message_start
	Index        int             `json:"index"`         // content_block_*
	ContentBlock *contentBlock   `json:"content_block"` // content_block_start
	Delta        eventDelta      `json:"delta"`         // content_block_delta, message_delta
	Usage        *usage          `json:"usage"`         // message_delta
	Error        json.RawMessage `json:"error"`         // error
}

type eventDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	StopReason  string `json:"stop_reason"`
}

// readMessage reads a non-streamed reply.
func readMessage(body io.Reader) (*llm.Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var m replyMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, wire.Malformed("reply", err)
	}
	if m.Type == "error" || (len(m.Error) > 0 && string(m.Error) != "null") {
		return nil, replyError(m.Error)
	}
	var r reply
	r.start(&m)
	for i := range m.Content {
		r.startBlock(i, &m.Content[i], nil)
	}
	r.stopReason = m.StopReason
	return r.response(), nil
}

// readStream reads a streamed reply: named events from message_start to
// message_stop. Text and thinking pieces go to onDelta as they arrive;
// ping and unknown events are ignored. A stream that ends before
// message_stop is a transient `network` error; an error event is a
// categorised error.
func readStream(body io.Reader, onDelta func(llm.Delta)) (*llm.Response, error) {
	events := wire.NewEventReader(body, "message_stop")
	var r reply
	var ev streamEvent
	for {
		name, data, err := events.Next()
		if err != nil {
			return nil, err
		}
		ev = streamEvent{}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, wire.Malformed("stream event", err)
		}
		typ := ev.Type
		if typ == "" {
			typ = string(name)
		}
		switch typ {
		case "message_start":
			if ev.Message != nil {
				r.start(ev.Message)
			}
		case "content_block_start":
			if ev.ContentBlock != nil {
				r.startBlock(ev.Index, ev.ContentBlock, onDelta)
			}
		case "content_block_delta":
			r.delta(ev.Index, &ev.Delta, onDelta)
		case "message_delta":
			if ev.Delta.StopReason != "" {
				r.stopReason = ev.Delta.StopReason
			}
			r.addUsage(ev.Usage)
		case "message_stop":
			return r.response(), nil
		case "error":
			return nil, replyError(ev.Error)
		}
	}
}

// reply accumulates a reply's content blocks, by index.
type reply struct {
	model      string
	blocks     []*blockBuilder
	stopReason string
	usage      llm.Usage
}

type blockBuilder struct {
	typ       string
	text      strings.Builder // text, or thinking
	signature string
	data      string // redacted_thinking
	id, name  string
	input     strings.Builder // a tool's input JSON, in pieces
}

func (r *reply) start(m *replyMessage) {
	r.model = m.Model
	r.addUsage(m.Usage)
}

func (r *reply) addUsage(u *usage) {
	if u == nil {
		return
	}
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&r.usage.InputTokens, u.InputTokens)
	set(&r.usage.OutputTokens, u.OutputTokens)
	set(&r.usage.CacheWriteTokens, u.CacheCreationInputTokens)
	set(&r.usage.CacheReadTokens, u.CacheReadInputTokens)
}

// maxBlocks bounds the block index a stream may use.
const maxBlocks = 1 << 12

// at returns the builder of block index, creating it; nil for an index
// out of range.
func (r *reply) at(index int) *blockBuilder {
	if index < 0 || index >= maxBlocks {
		return nil
	}
	for len(r.blocks) <= index {
		r.blocks = append(r.blocks, nil)
	}
	if r.blocks[index] == nil {
		r.blocks[index] = &blockBuilder{}
	}
	return r.blocks[index]
}

func (r *reply) startBlock(index int, c *contentBlock, onDelta func(llm.Delta)) {
	b := r.at(index)
	if b == nil {
		return
	}
	*b = blockBuilder{typ: c.Type, id: c.ID, name: c.Name, signature: c.Signature, data: c.Data}
	switch c.Type {
	case "text":
		r.text(b, c.Text, onDelta)
	case "thinking":
		r.thinking(b, c.Thinking, onDelta)
	case "tool_use":
		// A streamed tool_use starts with input {} and gets its input in
		// input_json_delta pieces; a non-streamed one has it whole.
		if in := strings.TrimSpace(string(c.Input)); in != "null" && in != "{}" {
			b.input.WriteString(in)
		}
	}
}

// delta applies a content_block_delta to the block it belongs to; deltas
// of other kinds (citations, ...) or for blocks of other types are ignored.
func (r *reply) delta(index int, d *eventDelta, onDelta func(llm.Delta)) {
	b := r.at(index)
	if b == nil {
		return
	}
	switch {
	case d.Type == "text_delta" && b.typ == "text":
		r.text(b, d.Text, onDelta)
	case d.Type == "thinking_delta" && b.typ == "thinking":
		r.thinking(b, d.Thinking, onDelta)
	case d.Type == "signature_delta" && b.typ == "thinking":
		b.signature += d.Signature
	case d.Type == "input_json_delta" && b.typ == "tool_use":
		b.input.WriteString(d.PartialJSON)
	}
}

func (r *reply) text(b *blockBuilder, s string, onDelta func(llm.Delta)) {
	if s == "" {
		return
	}
	b.text.WriteString(s)
	if onDelta != nil {
		onDelta(llm.Delta{Text: s})
	}
}

func (r *reply) thinking(b *blockBuilder, s string, onDelta func(llm.Delta)) {
	if s == "" {
		return
	}
	b.text.WriteString(s)
	if onDelta != nil {
		onDelta(llm.Delta{Thinking: s})
	}
}

// response assembles the reply. The API's input_tokens leaves out the
// tokens read from and written to the cache; llm.Usage counts them in.
func (r *reply) response() *llm.Response {
	resp := &llm.Response{Model: r.model, Usage: r.usage}
	resp.Usage.InputTokens += r.usage.CacheReadTokens + r.usage.CacheWriteTokens
	var text strings.Builder
	for _, b := range r.blocks {
		if b == nil {
			continue
		}
		switch b.typ {
		case "text":
			text.WriteString(b.text.String())
		case "thinking":
			resp.Thinking = append(resp.Thinking, message.Block{Type: message.BlockThinking, Thinking: b.text.String(), Signature: b.signature})
		case "redacted_thinking":
			resp.Thinking = append(resp.Thinking, message.Block{Type: message.BlockRedactedThinking, Data: b.data})
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, message.ToolCall{ID: b.id, Name: b.name, Arguments: wire.DecodeArguments(b.input.String())})
		}
	}
	resp.Text = text.String()
	resp.StopReason = stopReason(r.stopReason, len(resp.ToolCalls) > 0)
	return resp
}

// stopReason keeps the API's stop_reason, whose names llm uses too
// (end_turn, tool_use, max_tokens, stop_sequence; others such as
// pause_turn and refusal pass through). A reply that calls tools stops for
// tool_use unless it was cut short (max_tokens).
func stopReason(reason string, hasCalls bool) string {
	if reason == "" || reason == llm.StopEnd {
		if hasCalls {
			return llm.StopToolUse
		}
		return llm.StopEnd
	}
	return reason
}
