package export

import (
	"strings"
	"testing"
)

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
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
