package mock

import (
	"encoding/json"
	"sort"
	"strings"
)

// exampleText is the mock's default reply to a request for structured
// output: the JSON of a small value that the schema accepts (Example).
func exampleText(schema map[string]any) string {
	data, err := json.Marshal(Example(schema))
	if err != nil {
		return "null"
	}
	return string(data)
}

// Example returns a small, deterministic value for a JSON Schema: const,
// else the first enum value, else default, else by type (the first of a
// list): an object of its required properties, an array of minItems
// elements, a string of minLength "x"s, the minimum of a number (0 when
// none), false, null; anyOf/oneOf/allOf take their first alternative,
// $ref follows "#/$defs/..." and "#/definitions/...". It covers the
// schemas pipelines write for their outputs; a value it gets wrong is
// refused by validation like any bad reply.
func Example(schema map[string]any) any { return example(schema, schema, 0) }

func example(root, s map[string]any, depth int) any {
	if depth > 32 || s == nil {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
			if name, ok := strings.CutPrefix(ref, prefix); ok {
				defs, _ := root[strings.Trim(prefix[1:], "/")].(map[string]any)
				sub, _ := defs[name].(map[string]any)
				return example(root, sub, depth+1)
			}
		}
		return nil
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := s["default"]; ok {
		return d
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			sub, _ := alts[0].(map[string]any)
			return example(root, sub, depth+1)
		}
	}
	typ, _ := s["type"].(string)
	if types, ok := s["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := map[string]any{}
		req, _ := s["required"].([]any)
		names := make([]string, 0, len(req))
		for _, r := range req {
			if name, ok := r.(string); ok {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			sub, _ := props[name].(map[string]any)
			out[name] = example(root, sub, depth+1)
		}
		return out
	case "array":
		n := intOf(s["minItems"])
		items, _ := s["items"].(map[string]any)
		out := make([]any, n)
		for i := range out {
			out[i] = example(root, items, depth+1)
		}
		return out
	case "string":
		return strings.Repeat("x", intOf(s["minLength"]))
	case "integer":
		return int64(intOf(s["minimum"]))
	case "number":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return int64(intOf(s["minimum"]))
	case "boolean":
		return false
	}
	return nil
}

// intOf reads a non-negative count of a schema (0 when absent).
func intOf(v any) int {
	switch v := v.(type) {
	case int64:
		return int(v)
	case int:
		return v
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}
