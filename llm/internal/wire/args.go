package wire

import (
	"strings"

	"github.com/skein-dev/skein/internal/jsonvalue"
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
