package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/openaiwire"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// A non-streamed reply.
type completion struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      replyMessage `json:"message"`
		FinishReason string       `json:"finish_reason"`
	} `json:"choices"`
	Usage *openaiwire.Usage `json:"usage"`
	Error json.RawMessage   `json:"error"`
}

// One chunk of a streamed reply. Fields not listed (id, created,
// system_fingerprint, obfuscation, logprobs, ...) are ignored.
type chunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int          `json:"index"`
		Delta        replyMessage `json:"delta"`
		FinishReason string       `json:"finish_reason"`
	} `json:"choices"`
	Usage *openaiwire.Usage `json:"usage"`
	Error json.RawMessage   `json:"error"`
}

// replyMessage is a reply's message, or a streamed delta of it.
type replyMessage struct {
	Content flexText `json:"content"`
	Refusal string   `json:"refusal"`
	// Reasoning text of servers that expose it: reasoning_content
	// (DeepSeek, vLLM) or reasoning (OpenRouter, Ollama, newer vLLM).
	ReasoningContent string         `json:"reasoning_content"`
	Reasoning        string         `json:"reasoning"`
	ToolCalls        []toolCallPart `json:"tool_calls"`
}

// toolCallPart is a tool call, or in a stream a fragment of one: the
// first fragment of a call has its id and name, later ones pieces of the
// arguments.
type toolCallPart struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string   `json:"name"`
		Arguments flexText `json:"arguments"`
	} `json:"function"`
}

// flexText decodes the text fields servers do not agree on: a string,
// null, a list of content parts (their text joined), or another JSON value
// (kept as its JSON text: a tool call's arguments sent as an object).
type flexText string

func (t *flexText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0:
		*t = flexText(b[1 : len(b)-1])
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = flexText(s)
	case string(b) == "null":
		*t = ""
	case b[0] == '[':
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var s strings.Builder
		for _, p := range parts {
			s.WriteString(p.Text)
		}
		*t = flexText(s.String())
	default:
		*t = flexText(b)
	}
	return nil
}

// readCompletion reads a non-streamed reply.
func readCompletion(body io.Reader) (*llm.Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, wire.Malformed("reply", err)
	}
	if openaiwire.HasError(c.Error) {
		return nil, openaiwire.ReplyError(c.Error)
	}
	if len(c.Choices) == 0 {
		return nil, &llm.Error{Category: llm.ServerError, Message: "the reply has no choices"}
	}
	var r reply
	r.model = c.Model
	if c.Usage != nil {
		r.usage = c.Usage.LLM()
	}
	ch := &c.Choices[0]
	r.add(&ch.Message, nil)
	r.finish = ch.FinishReason
	return r.response(), nil
}

// readStream reads a streamed reply: `data:` events of JSON chunks ending
// with `data: [DONE]`. Text and reasoning pieces go to onDelta as they
// arrive. A stream that ends before [DONE] is a transient `network` error;
// an error object in the stream is a categorised error.
func readStream(body io.Reader, onDelta func(llm.Delta)) (*llm.Response, error) {
	events := wire.NewEventReader(body, "[DONE]")
	var r reply
	var c chunk
	for {
		_, data, err := events.Next()
		if err != nil {
			return nil, err
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return r.response(), nil
		}
		c = chunk{}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, wire.Malformed("stream chunk", err)
		}
		if openaiwire.HasError(c.Error) {
			return nil, openaiwire.ReplyError(c.Error)
		}
		if r.model == "" {
			r.model = c.Model
		}
		if c.Usage != nil {
			r.usage = c.Usage.LLM()
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			if ch.Index != 0 {
				continue
			}
			r.add(&ch.Delta, onDelta)
			if ch.FinishReason != "" {
				r.finish = ch.FinishReason
			}
		}
	}
}

// reply accumulates a reply from a message or from the deltas of a stream.
type reply struct {
	model    string
	text     strings.Builder
	refusal  strings.Builder
	thinking strings.Builder
	calls    []*callBuilder
	byIndex  map[int]*callBuilder
	finish   string
	usage    llm.Usage
}

type callBuilder struct {
	id, name string
	args     strings.Builder
}

// add takes in a message or a delta; onDelta, if set, gets its text.
func (r *reply) add(m *replyMessage, onDelta func(llm.Delta)) {
	if m.Content != "" {
		r.text.WriteString(string(m.Content))
		if onDelta != nil {
			onDelta(llm.Delta{Text: string(m.Content)})
		}
	}
	r.refusal.WriteString(m.Refusal)
	thinking := m.ReasoningContent
	if thinking == "" {
		thinking = m.Reasoning
	}
	if thinking != "" {
		r.thinking.WriteString(thinking)
		if onDelta != nil {
			onDelta(llm.Delta{Thinking: thinking})
		}
	}
	for pos := range m.ToolCalls {
		r.addCall(&m.ToolCalls[pos], pos)
	}
}

// addCall merges a tool call fragment. Fragments are matched by their
// index (by their position when a server leaves the index out); a
// fragment with an id other than the one already seen at its index starts
// a new call, for servers that send every call whole at index 0.
func (r *reply) addCall(part *toolCallPart, pos int) {
	index := pos
	if part.Index != nil {
		index = *part.Index
	}
	c := r.byIndex[index]
	if c == nil || (part.ID != "" && c.id != "" && part.ID != c.id) {
		c = &callBuilder{}
		r.calls = append(r.calls, c)
		if r.byIndex == nil {
			r.byIndex = map[int]*callBuilder{}
		}
		r.byIndex[index] = c
	}
	if c.id == "" {
		c.id = part.ID
	}
	if c.name == "" {
		c.name = part.Function.Name
	}
	c.args.WriteString(string(part.Function.Arguments))
}

func (r *reply) response() *llm.Response {
	resp := &llm.Response{Text: r.text.String(), Model: r.model, Usage: r.usage}
	if resp.Text == "" && r.refusal.Len() > 0 {
		resp.Text = r.refusal.String()
	}
	if r.thinking.Len() > 0 {
		resp.Thinking = []message.Block{{Type: message.BlockThinking, Thinking: r.thinking.String()}}
	}
	for i, c := range r.calls {
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		resp.ToolCalls = append(resp.ToolCalls, message.ToolCall{ID: id, Name: c.name, Arguments: wire.DecodeArguments(c.args.String())})
	}
	resp.StopReason = stopReason(r.finish, len(resp.ToolCalls) > 0)
	return resp
}

// stopReason maps a finish_reason: stop → end_turn, tool_calls (and the
// legacy function_call) → tool_use, length → max_tokens; other values
// (content_filter, ...) are kept as they are. A reply that calls tools
// stops for tool_use even when the server says stop.
func stopReason(finish string, hasCalls bool) string {
	switch finish {
	case "stop", "":
		if hasCalls {
			return llm.StopToolUse
		}
		return llm.StopEnd
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "length":
		return llm.StopMaxTokens
	}
	return finish
}
