package sessions

import (
	"errors"
	"strings"
	"testing"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// TestDepthLimit: a JSON value nested more than MaxDepth levels is a
// DepthError naming its path wherever it is decoded or checked, and a
// million levels is an error, not a stack overflow.
func TestDepthLimit(t *testing.T) {
	if _, err := DecodeJSON([]byte(nested("[", "]", MaxDepth))); err != nil {
		t.Errorf("MaxDepth levels: %v", err)
	}
	for _, tc := range []struct {
		name, text, path string
	}{
		{"lists", nested("[", "]", MaxDepth+1), "[0]"},
		{"objects", `{"a":` + nested(`{"a":`, "}", MaxDepth) + "1}", ".a.a"},
		{"a million", nested("[", "]", 1_000_000), "[0][0]"},
		{"slow path", `{"A b":1,"x":[0,` + nested("[", "]", MaxDepth) + `]}`, `.x[1][0]`},
	} {
		_, err := DecodeJSON([]byte(tc.text))
		var de *DepthError
		if !errors.As(err, &de) || !strings.HasPrefix(de.Path, tc.path) || !strings.Contains(err.Error(), "value nested deeper than 1000 levels") {
			t.Errorf("%s: DecodeJSON = %v, want a DepthError at %s...", tc.name, err, tc.path)
		}
	}
	var v any = []any{}
	for range MaxDepth - 1 {
		v = []any{v}
	}
	if err := CheckJSONValue(map[string]any{"k": v}); err == nil || !strings.HasPrefix(err.Error(), "at .k[0][0]") || !strings.HasSuffix(err.Error(), "[0]: value nested deeper than 1000 levels") {
		t.Errorf("CheckJSONValue = %v", err)
	}
	if err := CheckJSONValue(v); err != nil {
		t.Errorf("CheckJSONValue of MaxDepth levels = %v", err)
	}
	var m Message
	err := m.UnmarshalJSON([]byte(`{"role":"assistant","content":"x","tool_calls":[{"id":"c","name":"f","arguments":{"a":` + nested("[", "]", 1_000_000) + `}}]}`))
	if err == nil || !strings.Contains(err.Error(), `at .tool_calls[0].arguments.a[0][0]`) {
		t.Errorf("a message with deep arguments: %v", err)
	}
}

// TestImportDeep: an export whose message nests a million levels is a
// clean import error naming the line and the path, in both formats.
func TestImportDeep(t *testing.T) {
	deep := nested("[", "]", 1_000_000)
	jsonl := `{"_type":"header","version":1,"id":"d","status":"active","created_at":"2020-01-01T00:00:00Z","updated_at":"2020-01-01T00:00:00Z","summary":null,"metadata":{},"parent_id":null,"child_ids":[],"branched_at":null,"turns":0,"max_turns":null,"message_count":1,"event_count":0}
{"_type":"message","index":0,"message":{"role":"user","content":"x","metadata":{"m":` + deep + `}}}
`
	_, _, err := ReadExport(strings.NewReader(jsonl))
	if err == nil || !strings.Contains(err.Error(), "line 2: at .message.metadata.m[0][0]") {
		t.Errorf("JSONL: %v", err)
	}
	json := `{"_type":"transcript","version":1,"id":"d","status":"active","created_at":"2020-01-01T00:00:00Z","updated_at":"2020-01-01T00:00:00Z","events":[],"summary":null,"metadata":{},"parent_id":null,"child_ids":[],"branched_at":null,"turns":0,
"messages":[{"role":"user","content":"x","metadata":{"m":` + nested("[", "]", 5000) + `}}]}`
	_, _, err = ReadExport(strings.NewReader(json))
	if err == nil || !strings.Contains(err.Error(), "at .messages[0].metadata.m[0][0]") {
		t.Errorf("JSON: %v", err)
	}
}
