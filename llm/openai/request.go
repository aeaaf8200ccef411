package openai

import (
	"encoding/json"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// The request body of POST /chat/completions.
type chatRequest struct {
	Model string `json:"model"`
	// Messages is not set when encoding: the body is assembled from the
	// messages' cached wire forms (encodeRequest).
	Messages            []chatMessage   `json:"messages,omitempty"`
	Tools               []chatTool      `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
}

// responseFormat asks for structured output: {"type": "json_schema",
// "json_schema": {name, schema, strict}}.
type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string         `json:"name"`
	Schema map[string]any `json:"schema"`
	Strict bool           `json:"strict"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a list of content parts, or nil (null: an
	// assistant message that only calls tools).
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type textPart struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type imagePart struct {
	Type     string   `json:"type"` // "image_url"
	ImageURL imageURL `json:"image_url"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name string `json:"name"`
	// Arguments is the arguments object encoded as a JSON string.
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function functionSpec `json:"function"`
}

type functionSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// encodeRequest maps req onto the wire format:
//
//   - the system prompt is a first `system` message; system messages of the
//     transcript stay where they are;
//   - string content stays a string; block content becomes content parts
//     (text blocks `{"type":"text"}`, image blocks `image_url` with a data:
//     URL), thinking blocks are dropped; an assistant's block content is
//     sent as its text (Chat Completions takes no images or reasoning from
//     the assistant);
//   - assistant tool calls carry their arguments as a JSON string, and
//     content null when the message has no text;
//   - tool results are `tool` messages with tool_call_id; the protocol has
//     no error flag, so is_error is not sent (the result text says it);
//   - a tool without a parameter schema gets the empty object schema;
//   - tool_choice is sent only with tools: "auto", "none", "required", or
//     a named function for any other value;
//   - MaxTokens > 0 is max_completion_tokens for "openai" and "azure" and
//     max_tokens for every other server (older compatible servers know
//     only that);
//   - Thinking is reasoning_effort (its effort, or the effort its budget
//     stands for);
//   - streaming asks for the usage chunk (stream_options.include_usage);
//   - Output is response_format {type: "json_schema", json_schema: {name,
//     schema, strict}}, strict when the schema meets strict mode's rules
//     (llm.Output.Strict).
//
// Each message's JSON depends on the message alone, so it is kept in
// req.Cache between the calls of a conversation, joined in one buffer
// (llm.WireJoined): a request encodes only the messages that are new, and
// its body holds the history as one piece.
func (p *Provider) encodeRequest(req *llm.Request) (*wire.JSON, error) {
	out := chatRequest{
		Model:       req.Model,
		Temperature: req.Temperature,
		Stop:        req.Stop,
	}
	history, err := llm.WireJoined(req.Cache, wireProtocol, req.Messages, encodeMessageJSON)
	if err != nil {
		return nil, err
	}
	var system [][]byte
	if req.System != "" {
		data, err := json.Marshal(chatMessage{Role: message.RoleSystem, Content: req.System})
		if err != nil {
			return nil, err
		}
		system = [][]byte{data}
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		params := wire.Parameters(t)
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: functionSpec{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice {
		case "":
		case "auto", "none", "required":
			out.ToolChoice = req.ToolChoice
		default:
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]any{"name": req.ToolChoice}}
		}
	}
	if req.MaxTokens > 0 {
		if p.name == NameOpenAI || p.azure {
			out.MaxCompletionTokens = req.MaxTokens
		} else {
			out.MaxTokens = req.MaxTokens
		}
	}
	if req.Thinking != nil {
		out.ReasoningEffort = req.Thinking.Level()
	}
	if req.Stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if o := req.Output; o != nil {
		out.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: o.SchemaName(), Schema: o.Schema, Strict: o.Strict()}}
	}
	return wire.Body(out, "messages", system, [][]byte{history})
}

// wireProtocol names this package's message forms in an llm.WireCache.
const wireProtocol = "openai-chat"

// encodeMessageJSON returns the JSON of message i on the wire.
func encodeMessageJSON(msgs []message.Message, i int) ([]byte, error) {
	out, err := encodeMessage(&msgs[i])
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func encodeMessage(m *message.Message) (chatMessage, error) {
	out := chatMessage{Role: m.Role, ToolCallID: m.ToolCallID}
	switch {
	case m.Blocks == nil:
		out.Content = m.Text
	case m.Role == message.RoleAssistant:
		out.Content = m.TextContent()
	default:
		out.Content = contentParts(m.Blocks)
	}
	if m.Role != message.RoleAssistant || len(m.ToolCalls) == 0 {
		return out, nil
	}
	if out.Content == "" {
		out.Content = nil
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		args, err := wire.EncodeArguments(c)
		if err != nil {
			return out, err
		}
		out.ToolCalls = append(out.ToolCalls, chatToolCall{ID: c.ID, Type: "function", Function: chatFunction{Name: c.Name, Arguments: args}})
	}
	return out, nil
}

// contentParts maps blocks onto content parts, dropping thinking blocks.
// With nothing left the content is the empty string.
func contentParts(blocks []message.Block) any {
	var parts []any
	for _, b := range blocks {
		switch b.Type {
		case message.BlockText:
			parts = append(parts, textPart{Type: "text", Text: b.Text})
		case message.BlockImage:
			parts = append(parts, imagePart{Type: "image_url", ImageURL: imageURL{URL: "data:" + b.MediaType + ";base64," + b.Data}})
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return parts
}
