package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// RawArgumentsKey is the single key of the arguments of a tool call whose
// arguments the model sent as something other than a JSON object (invalid
// JSON, a JSON array, text cut short at the token limit): the call keeps
// the text under this key instead of failing the whole model call, so the
// agent loop can report the problem to the model as a tool error and let
// it try again.
const RawArgumentsKey = "_raw"

// DecodeArguments decodes a tool call's arguments: empty text and null are
// the empty object; text that is not a JSON object becomes
// {RawArgumentsKey: text}.
func DecodeArguments(text string) map[string]any {
	if t := strings.TrimSpace(text); t == "" || t == "null" {
		return map[string]any{}
	}
	args, err := jsonvalue.DecodeObject([]byte(text))
	if err != nil {
		return map[string]any{RawArgumentsKey: text}
	}
	return args
}

// EncodeArguments returns a tool call's arguments as JSON text; no
// arguments are the empty object.
func EncodeArguments(c *message.ToolCall) (string, error) {
	args := c.Arguments
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("tool call '%s' arguments: %v", c.ID, err)
	}
	return string(b), nil
}

// Parameters returns a tool's parameter schema: the empty object schema
// when it has none.
func Parameters(t *llm.ToolSpec) map[string]any {
	if t.Parameters == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return t.Parameters
}
