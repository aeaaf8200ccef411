package llm

// Output asks a model for a reply that is one JSON value matching a JSON
// Schema (structured output). Each provider sends it in its own native
// form: OpenAI Chat Completions `response_format` (json_schema),
// Responses `text.format`, Anthropic `output_config.format`, Gemini
// `generationConfig.responseJsonSchema`. A provider without one ignores
// it; the caller validates every reply anyway (package agent).
type Output struct {
	// Name names the schema where a protocol wants a name (OpenAI); ""
	// is DefaultOutputName.
	Name string
	// Schema is the JSON Schema, as a decoded JSON object.
	Schema map[string]any
}

// DefaultOutputName is the schema's name when Output.Name is empty.
const DefaultOutputName = "output"

// SchemaName returns the name a protocol sends with the schema.
func (o *Output) SchemaName() string {
	if o.Name == "" {
		return DefaultOutputName
	}
	return o.Name
}

// Strict reports whether the schema meets the rules of OpenAI's strict
// mode: every object schema in it sets additionalProperties to false and
// lists every property in required. A strict request is refused by the
// server when they are not met, so a schema that breaks them is sent
// without strict (the reply is still validated by the caller).
func (o *Output) Strict() bool { return strictSchema(o.Schema) }

func strictSchema(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok || v["type"] == "object" {
			if ap, ok := v["additionalProperties"].(bool); !ok || ap {
				return false
			}
			req, _ := v["required"].([]any)
			have := make(map[string]bool, len(req))
			for _, r := range req {
				if s, ok := r.(string); ok {
					have[s] = true
				}
			}
			for k := range props {
				if !have[k] {
					return false
				}
			}
		}
		for _, sub := range v {
			if !strictSchema(sub) {
				return false
			}
		}
	case []any:
		for _, sub := range v {
			if !strictSchema(sub) {
				return false
			}
		}
	}
	return true
}
