package export

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// importSeeds are exports to start FuzzReadExport from: a JSONL and a
// JSON export of a session with tool calls and events, and the hostile
// files of testdata/malicious.
func importSeeds(f *testing.F) {
	rec := &sessions.Record{ID: "s", Status: sessions.StatusActive, Turns: 1,
		Messages: []message.Message{
			{Role: message.RoleUser, Text: "hi"},
			{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "f", Arguments: map[string]any{"a": []any{int64(1), 2.5, "x"}}}}},
			{Role: message.RoleTool, ToolCallID: "c1", Text: "ok", Metadata: map[string]any{"k": true}},
		}}
	for i, m := range rec.Messages {
		rec.Events = append(rec.Events, sessions.Event{Seq: int64(i + 1), Type: sessions.EventMessage, SessionID: "s",
			Data: map[string]any{"index": int64(i), "role": m.Role}})
	}
	var jsonl, js bytes.Buffer
	if err := WriteJSONL(&jsonl, rec, nil); err != nil {
		f.Fatal(err)
	}
	if err := WriteJSON(&js, rec); err != nil {
		f.Fatal(err)
	}
	f.Add(jsonl.Bytes())
	f.Add(js.Bytes())
	files, _ := filepath.Glob("testdata/malicious/*")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
}

// FuzzReadExport: any input to an import is read or refused with an
// error, never a panic or a hang; what it accepts is a valid transcript
// that exports and reads back to the same messages.
func FuzzReadExport(f *testing.F) {
	importSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, appended, err := ReadExport(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of several lines: %q", err)
			}
			return
		}
		if err := checkImported(rec, appended); err != nil {
			t.Fatalf("accepted an export that checkImported refuses: %v", err)
		}
		var out bytes.Buffer
		if err := WriteJSONL(&out, rec, appended); err != nil {
			t.Fatalf("cannot export what was imported: %v", err)
		}
		again, _, err := ReadExport(&out)
		if err != nil {
			t.Fatalf("cannot read back the export of an import: %v\n%s", err, out.Bytes())
		}
		if len(again.Messages) != len(rec.Messages) || len(again.Events) != len(rec.Events) {
			t.Fatalf("round trip: %d messages and %d events, then %d and %d",
				len(rec.Messages), len(rec.Events), len(again.Messages), len(again.Events))
		}
	})
}
