package llm

import "testing"

func TestOutputStrict(t *testing.T) {
	closed := func(extra map[string]any) map[string]any {
		s := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	tests := []struct {
		name   string
		schema map[string]any
		want   bool
	}{
		{"closed", closed(nil), true},
		{"open", closed(map[string]any{"additionalProperties": true}), false},
		{"no additionalProperties", map[string]any{"type": "object", "required": []any{"a"}, "properties": map[string]any{"a": map[string]any{}}}, false},
		{"optional property", closed(map[string]any{"required": []any{}}), false},
		{"nested open object", closed(map[string]any{"properties": map[string]any{"a": map[string]any{"type": "object"}}}), false},
		{"nested in items", closed(map[string]any{"properties": map[string]any{"a": map[string]any{"type": "array", "items": closed(nil)}}}), true},
		{"not an object", map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, true},
	}
	for _, tc := range tests {
		if got := (&Output{Schema: tc.schema}).Strict(); got != tc.want {
			t.Errorf("%s: Strict() = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := (&Output{}).SchemaName(); n != DefaultOutputName {
		t.Errorf("SchemaName() = %q", n)
	}
}
