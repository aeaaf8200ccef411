package gemini

import (
	"encoding/json"
	"fmt"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// The request body of generateContent and streamGenerateContent.
type request struct {
	SystemInstruction json.RawMessage   `json:"systemInstruction,omitempty"` // a content of text parts
	Contents          []content         `json:"contents,omitempty"`          // not set when encoding (see encodeRequest)
	Tools             []tools           `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is a part of a content, in requests and replies alike. Text is a
// pointer so that a text part keeps its (possibly empty) text and other
// parts have none.
type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *inlineData       `json:"inlineData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	// raw, when set, is the part exactly as the API sent it; it is sent
	// back as it is.
	raw json.RawMessage
}

// MarshalJSON writes raw when the part has it, else its fields.
func (p part) MarshalJSON() ([]byte, error) {
	if p.raw != nil {
		return p.raw, nil
	}
	type fields part
	return json.Marshal(fields(p))
}

type inlineData struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type tools struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	Temperature     *float64        `json:"temperature,omitempty"`
	MaxOutputTokens int             `json:"maxOutputTokens,omitempty"`
	StopSequences   []string        `json:"stopSequences,omitempty"`
	ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
	// ResponseMimeType and ResponseJSONSchema ask for structured output.
	ResponseMimeType   string         `json:"responseMimeType,omitempty"`
	ResponseJSONSchema map[string]any `json:"responseJsonSchema,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  int  `json:"thinkingBudget"`
	IncludeThoughts bool `json:"includeThoughts"`
}

func textPart(s string) part { return part{Text: &s} }

// encodeRequest maps req onto the wire format:
//
//   - the system prompt and the transcript's system messages, in order,
//     are the systemInstruction (the API has no system role);
//   - user messages are `user` contents: text parts and inlineData parts
//     for images;
//   - an assistant message holding a thinking block of origin "gemini" is
//     the `model` content of the parts that block keeps, unchanged
//     (thought signatures in the parts they came with); any other
//     assistant message is a text part then one functionCall part per
//     tool call;
//   - each tool message is a functionResponse part named after its tool
//     (the message's name, else the name of the call it answers) with
//     response {"result": text}, or {"error": text} when the tool failed;
//     consecutive contents of one role are merged, so all the results of
//     one model turn form one user content;
//   - tools are functionDeclarations; tool_choice is toolConfig's mode:
//     auto AUTO, none NONE, required ANY, a tool's name ANY restricted to
//     it;
//   - temperature, MaxTokens (maxOutputTokens) and stop sequences go in
//     generationConfig, and Thinking as thinkingConfig {thinkingBudget,
//     includeThoughts: true};
//   - Output is generationConfig's responseMimeType "application/json"
//     and responseJsonSchema, on a request without tools (models before
//     Gemini 3 refuse a JSON reply format together with function calling;
//     with tools the caller's validation and repair turns do the work).
//
// Each message's parts depend on the message (and, for a tool result
// without a name, on the call before it), so their JSON is kept in
// req.Cache between the calls of a conversation (llm.WireForms); contents
// are merged from them when the request is assembled, which copies them
// and encodes only the new messages.
func encodeRequest(req *llm.Request) (*wire.JSON, error) {
	var out request
	forms, err := llm.WireForms(req.Cache, wireProtocol, req.Messages, encodeForm)
	if err != nil {
		return nil, err
	}
	var system [][]byte
	if req.System != "" {
		data, err := wire.Marshal(textPart(req.System))
		if err != nil {
			return nil, err
		}
		system = append(system, data)
	}
	size := 0
	for _, f := range forms {
		size += len(f.parts) + 32
	}
	turns := wire.NewTurns("parts", size)
	for _, f := range forms {
		if f.system {
			if len(f.parts) > 0 {
				system = append(system, f.parts)
			}
			continue
		}
		turns.Add(f.role, f.parts)
	}
	if len(system) > 0 {
		// {"parts":[...]}, copied from the cached forms.
		out.SystemInstruction = wire.Object("parts", system)
	}
	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			decls = append(decls, functionDeclaration{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
		out.Tools = []tools{{FunctionDeclarations: decls}}
		switch req.ToolChoice {
		case "":
		case "auto":
			out.ToolConfig = &toolConfig{functionCallingConfig{Mode: "AUTO"}}
		case "none":
			out.ToolConfig = &toolConfig{functionCallingConfig{Mode: "NONE"}}
		case "required":
			out.ToolConfig = &toolConfig{functionCallingConfig{Mode: "ANY"}}
		default:
			out.ToolConfig = &toolConfig{functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{req.ToolChoice}}}
		}
	}
	g := generationConfig{Temperature: req.Temperature, MaxOutputTokens: req.MaxTokens, StopSequences: req.Stop}
	if req.Thinking != nil {
		g.ThinkingConfig = &thinkingConfig{ThinkingBudget: req.Thinking.Budget(), IncludeThoughts: true}
	}
	if o := req.Output; o != nil && len(req.Tools) == 0 {
		g.ResponseMimeType, g.ResponseJSONSchema = "application/json", o.Schema
	}
	if g.Temperature != nil || g.MaxOutputTokens > 0 || len(g.StopSequences) > 0 || g.ThinkingConfig != nil || g.ResponseMimeType != "" {
		out.GenerationConfig = &g
	}
	return wire.Body(out, "contents", [][]byte{turns.Bytes()})
}

// wireProtocol names this package's message forms in an llm.WireCache.
const wireProtocol = "gemini"

// form is the wire form of one message: the role of the content it
// belongs to, or system for a system message (whose text part goes in
// the systemInstruction), and its parts' JSON, joined by commas (empty
// when the message has no part to send).
type form struct {
	system bool
	role   string
	parts  []byte
}

func encodeForm(msgs []message.Message, i int) (form, error) {
	m := &msgs[i]
	if m.Role == message.RoleSystem {
		f := form{system: true}
		if text := m.TextContent(); text != "" {
			data, err := wire.Marshal(textPart(text))
			if err != nil {
				return form{}, err
			}
			f.parts = data
		}
		return f, nil
	}
	c, err := encodeMessage(msgs, i)
	if err != nil {
		return form{}, err
	}
	parts, err := wire.Join(c.Parts)
	if err != nil {
		return form{}, err
	}
	return form{role: c.Role, parts: parts}, nil
}

// encodeMessage returns the content of message i, a user, assistant or
// tool message. A tool result without a name is named after the call it
// answers, found in the messages before it.
func encodeMessage(msgs []message.Message, i int) (content, error) {
	m := &msgs[i]
	switch m.Role {
	case message.RoleTool:
		name := m.Name
		if name == "" {
			name = callName(msgs[:i], m.ToolCallID)
		}
		key := "result"
		if m.IsError {
			key = "error"
		}
		return content{Role: "user", Parts: []part{{FunctionResponse: &functionResponse{ID: providerID(m.ToolCallID), Name: name, Response: map[string]any{key: m.TextContent()}}}}}, nil
	case message.RoleAssistant:
		return encodeAssistant(m)
	}
	c := content{Role: "user"}
	if m.Blocks == nil {
		if m.Text != "" {
			c.Parts = append(c.Parts, textPart(m.Text))
		}
		return c, nil
	}
	for _, b := range m.Blocks {
		switch b.Type {
		case message.BlockText:
			if b.Text != "" {
				c.Parts = append(c.Parts, textPart(b.Text))
			}
		case message.BlockImage:
			c.Parts = append(c.Parts, part{InlineData: &inlineData{MimeType: b.MediaType, Data: b.Data}})
		}
	}
	return c, nil
}

// providerID returns the id of a call to send back: id, unless it is
// one this package made up for a call the model sent without an id
// (madeUpID), which is never sent. Gemini 3 gives each functionCall an
// id and expects the functionResponse answering it to carry it.
func providerID(id string) string {
	if madeUpID(id) {
		return ""
	}
	return id
}

// callName returns the name of the last tool call with id in msgs ("" if
// none): the tool a result without a name answers.
func callName(msgs []message.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		calls := msgs[i].ToolCalls
		for j := len(calls) - 1; j >= 0; j-- {
			if calls[j].ID == id {
				return calls[j].Name
			}
		}
	}
	return ""
}

func encodeAssistant(m *message.Message) (content, error) {
	c := content{Role: "model"}
	for _, b := range m.Blocks {
		if b.Type != message.BlockThinking || b.Origin != Name || b.Data == "" {
			continue
		}
		var kept []json.RawMessage
		if err := json.Unmarshal([]byte(b.Data), &kept); err != nil {
			return c, fmt.Errorf("a thinking block of origin %s does not hold a list of parts: %v", Name, err)
		}
		for _, raw := range kept {
			c.Parts = append(c.Parts, part{raw: raw})
		}
	}
	if c.Parts != nil {
		return c, nil
	}
	if text := m.TextContent(); text != "" {
		c.Parts = append(c.Parts, textPart(text))
	}
	for i := range m.ToolCalls {
		call := &m.ToolCalls[i]
		args, err := wire.EncodeArguments(call)
		if err != nil {
			return c, err
		}
		c.Parts = append(c.Parts, part{FunctionCall: &functionCall{ID: providerID(call.ID), Name: call.Name, Args: json.RawMessage(args)}})
	}
	return c, nil
}
