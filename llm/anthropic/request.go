package anthropic

import (
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// The request body of POST /v1/messages.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	// System is a string, or a list of text blocks when it carries a
	// cache breakpoint.
	System        any           `json:"system,omitempty"`
	Messages      []wireMessage `json:"messages,omitempty"` // not set when encoding (see encodeRequest)
	Tools         []tool        `json:"tools,omitempty"`
	ToolChoice    *toolChoice   `json:"tool_choice,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Thinking      *thinkingCfg  `json:"thinking,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
}

// outputConfig asks for structured output: {"format": {"type":
// "json_schema", "schema": ...}}.
type outputConfig struct {
	Format outputFormat `json:"format"`
}

type outputFormat struct {
	Type   string         `json:"type"`
	Schema map[string]any `json:"schema"`
}

type thinkingCfg struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

// cacheControl marks a prompt-cache breakpoint: the prompt up to and
// including the marked block is cached.
type cacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

type wireMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type textBlock struct {
	Type         string        `json:"type"` // "text"
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageBlock struct {
	Type         string        `json:"type"` // "image"
	Source       imageSource   `json:"source"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type thinkingBlock struct {
	Type      string `json:"type"` // "thinking"
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type redactedThinkingBlock struct {
	Type string `json:"type"` // "redacted_thinking"
	Data string `json:"data"`
}

type toolUseBlock struct {
	Type         string         `json:"type"` // "tool_use"
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Input        map[string]any `json:"input"`
	CacheControl *cacheControl  `json:"cache_control,omitempty"`
}

type toolResultBlock struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	// Content is a string or a list of text and image blocks.
	Content      any           `json:"content,omitempty"`
	IsError      bool          `json:"is_error,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type tool struct {
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	InputSchema  map[string]any `json:"input_schema"`
	CacheControl *cacheControl  `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// encodeRequest maps req onto the wire format:
//
//   - the system prompt is the `system` field; system messages of the
//     transcript are appended to it in order (the API has no system role);
//   - user and assistant messages become content blocks: text, image
//     (base64 source), and on assistant messages thinking blocks with
//     their signatures and redacted_thinking blocks, unchanged, then one
//     tool_use block per tool call (thinking blocks another protocol made,
//     with an origin, are not sent);
//     empty text and thinking blocks without a signature (which the API
//     would refuse) are left out, and a message left with no block is
//     dropped;
//   - each tool message is a tool_result block (is_error when the tool
//     failed) in a user turn; consecutive messages of the same role are
//     merged into one turn, so all the results of one assistant turn
//     (and any user text after them) form one user message;
//   - max_tokens is always sent: MaxTokens, else the configured default;
//   - a tool without a parameter schema gets the empty object schema;
//   - tool_choice is sent only with tools: "auto" → auto, "required" →
//     any, "none" → none, any other value → that tool;
//   - Thinking is thinking {type: enabled, budget_tokens} (at least 1024);
//     max_tokens, which must exceed the budget, becomes budget plus the
//     default when it does not;
//   - Output is output_config {format: {type: "json_schema", schema}}
//     (Anthropic's structured outputs);
//   - unless NoCache is set, prompt-cache breakpoints (cache_control
//     ephemeral) mark the system prompt (then a list of one text block),
//     the last tool and the last block of the last message: three of the
//     four the API allows, so that a loop re-sending its transcript reads
//     everything but the newest turn from the cache.
//
// Each message's content blocks depend on the message alone, so their
// JSON is kept in req.Cache between the calls of a conversation
// (llm.WireForms); turns are merged from them when the request is
// assembled, which copies them and encodes only the new messages (and the
// messages of the last turn again, for its cache breakpoint).
func (p *Provider) encodeRequest(req *llm.Request) (*wire.JSON, error) {
	out := messagesRequest{
		Model:         req.Model,
		MaxTokens:     req.MaxTokens,
		Temperature:   req.Temperature,
		StopSequences: req.Stop,
		Stream:        req.Stream,
	}
	if out.MaxTokens <= 0 {
		out.MaxTokens = p.maxTokens
	}
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	forms, err := llm.WireForms(req.Cache, wireProtocol, req.Messages, encodeForm)
	if err != nil {
		return nil, err
	}
	// The last turn gets the cache breakpoint on its last block that can
	// carry one, so its messages are encoded again, with it; the turns
	// before it are merged from the cached forms.
	last := len(forms)
	if !req.NoCache {
		last = lastTurn(forms)
	}
	size := 0
	for _, f := range forms {
		size += len(f.blocks) + 32
	}
	turns := wire.NewTurns("content", size)
	var role string
	var blocks []any
	for i, f := range forms {
		switch {
		case f.system:
			if f.text != "" {
				system = append(system, f.text)
			}
		case i < last:
			turns.Add(f.role, f.blocks)
		case len(f.blocks) > 0:
			r, b := encodeMessage(&req.Messages[i])
			role, blocks = r, append(blocks, b...)
		}
	}
	items := [][]byte{turns.Bytes()}
	if blocks != nil {
		markLast(blocks)
		data, err := wire.Marshal(wireMessage{Role: role, Content: blocks})
		if err != nil {
			return nil, err
		}
		items = append(items, data)
	}
	if s := strings.Join(system, "\n\n"); s != "" {
		out.System = s
		if !req.NoCache {
			out.System = []textBlock{{Type: "text", Text: s, CacheControl: ephemeral}}
		}
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		schema := wire.Parameters(t)
		out.Tools = append(out.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if !req.NoCache {
		if n := len(out.Tools); n > 0 {
			out.Tools[n-1].CacheControl = ephemeral
		}
	}
	if req.Thinking != nil {
		budget := max(req.Thinking.Budget(), minThinkingBudget)
		out.Thinking = &thinkingCfg{Type: "enabled", BudgetTokens: budget}
		if out.MaxTokens <= budget {
			out.MaxTokens = budget + p.maxTokens
		}
	}
	if o := req.Output; o != nil {
		out.OutputConfig = &outputConfig{Format: outputFormat{Type: "json_schema", Schema: o.Schema}}
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice {
		case "":
		case "auto", "none":
			out.ToolChoice = &toolChoice{Type: req.ToolChoice}
		case "required":
			out.ToolChoice = &toolChoice{Type: "any"}
		default:
			out.ToolChoice = &toolChoice{Type: "tool", Name: req.ToolChoice}
		}
	}
	return wire.Body(out, "messages", items)
}

// wireProtocol names this package's message forms in an llm.WireCache.
const wireProtocol = "anthropic-messages"

// form is the wire form of one message: a system message's text, or the
// role of the turn it belongs to and its content blocks' JSON, joined by
// commas (empty when the message has no block to send).
type form struct {
	system bool
	text   string
	role   string
	blocks []byte
}

func encodeForm(msgs []message.Message, i int) (form, error) {
	m := &msgs[i]
	if m.Role == message.RoleSystem {
		return form{system: true, text: m.TextContent()}, nil
	}
	role, blocks := encodeMessage(m)
	data, err := wire.Join(blocks)
	if err != nil {
		return form{}, err
	}
	return form{role: role, blocks: data}, nil
}

// lastTurn returns the index of the first form of the last turn: the
// forms from there on that have blocks all have the role of the last
// one (system forms and forms without blocks do not end a turn).
func lastTurn(forms []form) int {
	role, start := "", len(forms)
	for i := len(forms) - 1; i >= 0; i-- {
		f := forms[i]
		if f.system || len(f.blocks) == 0 {
			continue
		}
		if role != "" && f.role != role {
			break
		}
		role, start = f.role, i
	}
	return start
}

// encodeMessage returns the role and the content blocks of a user,
// assistant or tool message.
func encodeMessage(m *message.Message) (role string, blocks []any) {
	if m.Role == message.RoleTool {
		r := toolResultBlock{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
		if m.Blocks == nil {
			if m.Text != "" {
				r.Content = m.Text
			}
		} else if c := contentBlocks(m.Blocks, false); len(c) > 0 {
			r.Content = c
		}
		return message.RoleUser, []any{r}
	}
	assistant := m.Role == message.RoleAssistant
	if m.Blocks == nil {
		if m.Text != "" {
			blocks = append(blocks, textBlock{Type: "text", Text: m.Text})
		}
	} else {
		blocks = contentBlocks(m.Blocks, assistant)
	}
	if assistant {
		for _, c := range m.ToolCalls {
			args := c.Arguments
			if args == nil {
				args = map[string]any{}
			}
			blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: args})
		}
	}
	return m.Role, blocks
}

// markLast puts a cache breakpoint on the last block that can carry one
// (thinking blocks cannot).
func markLast(blocks []any) {
	for i := len(blocks) - 1; i >= 0; i-- {
		switch b := blocks[i].(type) {
		case textBlock:
			b.CacheControl = ephemeral
			blocks[i] = b
		case imageBlock:
			b.CacheControl = ephemeral
			blocks[i] = b
		case toolUseBlock:
			b.CacheControl = ephemeral
			blocks[i] = b
		case toolResultBlock:
			b.CacheControl = ephemeral
			blocks[i] = b
		default:
			continue
		}
		return
	}
}

// contentBlocks maps blocks: text (when not empty), images except in an
// assistant's content, Anthropic's thinking (with a signature) and
// redacted thinking in an assistant's content only.
func contentBlocks(blocks []message.Block, assistant bool) []any {
	var out []any
	for _, b := range blocks {
		switch b.Type {
		case message.BlockText:
			if b.Text != "" {
				out = append(out, textBlock{Type: "text", Text: b.Text})
			}
		case message.BlockImage:
			if !assistant {
				out = append(out, imageBlock{Type: "image", Source: imageSource{Type: "base64", MediaType: b.MediaType, Data: b.Data}})
			}
		case message.BlockThinking:
			if assistant && b.Signature != "" && b.Origin == "" {
				out = append(out, thinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
			}
		case message.BlockRedactedThinking:
			if assistant {
				out = append(out, redactedThinkingBlock{Type: "redacted_thinking", Data: b.Data})
			}
		}
	}
	return out
}
