package telemetry

import (
	"encoding/json"

	"github.com/skein-dev/skein/sessions/message"
)

// Message content in the GenAI semantic conventions' JSON shapes:
// gen_ai.system_instructions is a list of parts, gen_ai.input.messages
// and gen_ai.output.messages lists of {role, parts[, finish_reason]}
// whose parts are {type: "text", content}, {type: "tool_call", id, name,
// arguments} or {type: "tool_call_response", id, response}. These are
// built only when content capture is on (Span.CaptureContent).

type part struct {
	Type      string         `json:"type"`
	Content   string         `json:"content,omitempty"`
	ID        string         `json:"id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Response  *string        `json:"response,omitempty"`
}

type genaiMessage struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// JSON encodes v, or returns "" when it cannot be encoded.
func JSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

// SystemInstructions is gen_ai.system_instructions of a system prompt.
func SystemInstructions(system string) string {
	if system == "" {
		return "[]"
	}
	return JSON([]part{{Type: "text", Content: system}})
}

// InputMessages is gen_ai.input.messages of the messages sent.
func InputMessages(msgs []message.Message) string {
	out := make([]genaiMessage, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		msg := genaiMessage{Role: m.Role, Parts: []part{}}
		if m.Role == message.RoleTool {
			text := m.TextContent()
			msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: &text})
		} else if text := m.TextContent(); text != "" {
			msg.Parts = append(msg.Parts, part{Type: "text", Content: text})
		}
		msg.Parts = appendCalls(msg.Parts, m.ToolCalls)
		out = append(out, msg)
	}
	return JSON(out)
}

// OutputMessages is gen_ai.output.messages of a reply.
func OutputMessages(text string, calls []message.ToolCall, finish string) string {
	msg := genaiMessage{Role: message.RoleAssistant, Parts: []part{}, FinishReason: finish}
	if text != "" {
		msg.Parts = append(msg.Parts, part{Type: "text", Content: text})
	}
	msg.Parts = appendCalls(msg.Parts, calls)
	return JSON([]genaiMessage{msg})
}

func appendCalls(parts []part, calls []message.ToolCall) []part {
	for _, c := range calls {
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		parts = append(parts, part{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
	}
	return parts
}
