package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
)

// The request body of generateContent and streamGenerateContent.
type request struct {
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Contents          []content         `json:"contents"`
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
//     includeThoughts: true}.
func encodeRequest(req *llm.Request) ([]byte, error) {
	out := request{Contents: make([]content, 0, len(req.Messages))}
	var system []part
	if req.System != "" {
		system = append(system, textPart(req.System))
	}
	callNames := map[string]string{}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role == sessions.RoleSystem {
			if s := m.TextContent(); s != "" {
				system = append(system, textPart(s))
			}
			continue
		}
		for _, c := range m.ToolCalls {
			callNames[c.ID] = c.Name
		}
		c, err := encodeMessage(m, callNames)
		if err != nil {
			return nil, fmt.Errorf("message %d: %v", i, err)
		}
		if len(c.Parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == c.Role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, c.Parts...)
			continue
		}
		out.Contents = append(out.Contents, c)
	}
	if len(system) > 0 {
		out.SystemInstruction = &content{Parts: system}
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
	if g.Temperature != nil || g.MaxOutputTokens > 0 || len(g.StopSequences) > 0 || g.ThinkingConfig != nil {
		out.GenerationConfig = &g
	}
	// Kept parts are sent exactly as they came: no HTML escaping.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func encodeMessage(m *sessions.Message, callNames map[string]string) (content, error) {
	switch m.Role {
	case sessions.RoleTool:
		name := m.Name
		if name == "" {
			name = callNames[m.ToolCallID]
		}
		key := "result"
		if m.IsError {
			key = "error"
		}
		return content{Role: "user", Parts: []part{{FunctionResponse: &functionResponse{Name: name, Response: map[string]any{key: m.TextContent()}}}}}, nil
	case sessions.RoleAssistant:
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
		case sessions.BlockText:
			if b.Text != "" {
				c.Parts = append(c.Parts, textPart(b.Text))
			}
		case sessions.BlockImage:
			c.Parts = append(c.Parts, part{InlineData: &inlineData{MimeType: b.MediaType, Data: b.Data}})
		}
	}
	return c, nil
}

func encodeAssistant(m *sessions.Message) (content, error) {
	c := content{Role: "model"}
	for _, b := range m.Blocks {
		if b.Type != sessions.BlockThinking || b.Origin != Name || b.Data == "" {
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
	for _, call := range m.ToolCalls {
		args := call.Arguments
		if args == nil {
			args = map[string]any{}
		}
		data, err := json.Marshal(args)
		if err != nil {
			return c, fmt.Errorf("tool call %q arguments: %v", call.ID, err)
		}
		c.Parts = append(c.Parts, part{FunctionCall: &functionCall{Name: call.Name, Args: data}})
	}
	return c, nil
}
