package openairesponses

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// The request body of POST /responses.
type request struct {
	Model           string      `json:"model"`
	Instructions    string      `json:"instructions,omitempty"`
	Input           []any       `json:"input,omitempty"` // not set when encoding (see encodeRequest)
	Tools           []tool      `json:"tools,omitempty"`
	ToolChoice      any         `json:"tool_choice,omitempty"`
	Temperature     *float64    `json:"temperature,omitempty"`
	MaxOutputTokens int         `json:"max_output_tokens,omitempty"`
	Reasoning       *reasoning  `json:"reasoning,omitempty"`
	Include         []string    `json:"include,omitempty"`
	Text            *textConfig `json:"text,omitempty"`
	Store           bool        `json:"store"`
	Stream          bool        `json:"stream,omitempty"`
}

// textConfig asks for structured output: {"format": {"type":
// "json_schema", name, schema, strict}}.
type textConfig struct {
	Format textFormat `json:"format"`
}

type textFormat struct {
	Type   string         `json:"type"`
	Name   string         `json:"name"`
	Schema map[string]any `json:"schema"`
	Strict bool           `json:"strict"`
}

type reasoning struct {
	Effort  string `json:"effort"`
	Summary string `json:"summary"`
}

// inputMessage is a message item in its short form.
type inputMessage struct {
	Role string `json:"role"`
	// Content is a string or a list of input parts.
	Content any `json:"content"`
}

type inputText struct {
	Type string `json:"type"` // "input_text"
	Text string `json:"text"`
}

type inputImage struct {
	Type     string `json:"type"` // "input_image"
	ImageURL string `json:"image_url"`
}

type functionCall struct {
	Type      string `json:"type"` // "function_call"
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type functionCallOutput struct {
	Type   string `json:"type"` // "function_call_output"
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

type tool struct {
	Type        string         `json:"type"` // "function"
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
	Strict      bool           `json:"strict"`
}

// reasoningModel matches the models that reason by default (o1..o9,
// gpt-5, codex): their replies need their encrypted reasoning included.
var reasoningModel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(o[1-9]($|-)|gpt-5|codex)`) })

// encodeRequest maps req onto the wire format:
//
//   - the system prompt is `instructions`; system messages of the
//     transcript stay in place as system message items;
//   - user messages are message items: string content stays a string,
//     blocks become input_text and input_image (data: URL) parts;
//   - an assistant message holding a thinking block of origin
//     "openai_responses" is sent as the output items that block keeps,
//     unchanged (reasoning items with their encrypted content, and the
//     message and function_call items they pair with); any other
//     assistant message is its text as a message item, then one
//     function_call item per tool call;
//   - tool results are function_call_output items (the protocol has no
//     error flag; the text says it);
//   - tools are functions with strict off (skein's schemas are not
//     written for strict mode); tool_choice is sent only with tools;
//   - MaxTokens is max_output_tokens; stop sequences do not exist in this
//     API and are not sent;
//   - Thinking becomes reasoning {effort, summary: "auto"}; a request with
//     Thinking, or to a model that reasons by default, asks for the
//     encrypted reasoning (include reasoning.encrypted_content);
//   - Output is text.format {type: "json_schema", name, schema, strict},
//     strict when the schema meets strict mode's rules
//     (llm.Output.Strict);
//   - store is always false: skein keeps the transcript.
//
// Each message's items depend on the message alone, so their JSON is kept
// in req.Cache between the calls of a conversation, joined in one buffer
// (llm.WireJoined): a request encodes only the messages that are new, and
// its body holds the history as one piece.
func encodeRequest(req *llm.Request) (*wire.JSON, error) {
	out := request{
		Model:           req.Model,
		Instructions:    req.System,
		Temperature:     req.Temperature,
		MaxOutputTokens: req.MaxTokens,
		Stream:          req.Stream,
	}
	history, err := llm.WireJoined(req.Cache, wireProtocol, req.Messages, encodeItems)
	if err != nil {
		return nil, err
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		params := wire.Parameters(t)
		out.Tools = append(out.Tools, tool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice {
		case "":
		case "auto", "none", "required":
			out.ToolChoice = req.ToolChoice
		default:
			out.ToolChoice = map[string]any{"type": "function", "name": req.ToolChoice}
		}
	}
	if req.Thinking != nil {
		out.Reasoning = &reasoning{Effort: req.Thinking.Level(), Summary: "auto"}
	}
	if req.Thinking != nil || reasoningModel().MatchString(req.Model) {
		out.Include = []string{"reasoning.encrypted_content"}
	}
	if o := req.Output; o != nil {
		out.Text = &textConfig{Format: textFormat{Type: "json_schema", Name: o.SchemaName(), Schema: o.Schema, Strict: o.Strict()}}
	}
	return wire.Body(out, "input", [][]byte{history})
}

// wireProtocol names this package's message forms in an llm.WireCache.
const wireProtocol = "openai-responses"

// encodeItems returns the input items of message i as JSON, joined by
// commas (nil when the message has none). Kept items go out exactly as
// they came (no HTML escaping).
func encodeItems(msgs []message.Message, i int) ([]byte, error) {
	items, err := encodeMessage(&msgs[i])
	if err != nil {
		return nil, err
	}
	return wire.Join(items)
}

func encodeMessage(m *message.Message) ([]any, error) {
	switch m.Role {
	case message.RoleTool:
		return []any{functionCallOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: m.TextContent()}}, nil
	case message.RoleAssistant:
		return encodeAssistant(m)
	}
	if m.Blocks == nil {
		return []any{inputMessage{Role: m.Role, Content: m.Text}}, nil
	}
	parts := make([]any, 0, len(m.Blocks))
	for _, b := range m.Blocks {
		switch b.Type {
		case message.BlockText:
			parts = append(parts, inputText{Type: "input_text", Text: b.Text})
		case message.BlockImage:
			parts = append(parts, inputImage{Type: "input_image", ImageURL: "data:" + b.MediaType + ";base64," + b.Data})
		}
	}
	if len(parts) == 0 {
		return []any{inputMessage{Role: m.Role, Content: ""}}, nil
	}
	return []any{inputMessage{Role: m.Role, Content: parts}}, nil
}

func encodeAssistant(m *message.Message) ([]any, error) {
	var items []any
	for _, b := range m.Blocks {
		if b.Type != message.BlockThinking || b.Origin != Name || b.Data == "" {
			continue
		}
		var kept []json.RawMessage
		if err := json.Unmarshal([]byte(b.Data), &kept); err != nil {
			return nil, fmt.Errorf("a thinking block of origin %s does not hold a list of output items: %v", Name, err)
		}
		for _, item := range kept {
			items = append(items, item)
		}
	}
	if items != nil {
		return items, nil
	}
	if text := m.TextContent(); text != "" {
		items = append(items, inputMessage{Role: message.RoleAssistant, Content: text})
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		args, err := wire.EncodeArguments(c)
		if err != nil {
			return nil, err
		}
		items = append(items, functionCall{Type: "function_call", CallID: c.ID, Name: c.Name, Arguments: args})
	}
	return items, nil
}
