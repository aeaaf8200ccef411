package sessions

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importSeeds are exports to start FuzzReadExport from: a JSONL and a
// JSON export of a session with tool calls and events, and the hostile
// files of testdata/malicious.
func importSeeds(f *testing.F) {
	rec := &Record{ID: "s", Status: StatusActive, Turns: 1,
		Messages: []Message{
			{Role: RoleUser, Text: "hi"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: map[string]any{"a": []any{int64(1), 2.5, "x"}}}}},
			{Role: RoleTool, ToolCallID: "c1", Text: "ok", Metadata: map[string]any{"k": true}},
		}}
	for i, m := range rec.Messages {
		rec.Events = append(rec.Events, Event{Seq: int64(i + 1), Type: EventMessage, SessionID: "s",
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

// FuzzCheckMessage: the message validator never panics, and a message it
// accepts still passes after an encode and decode.
func FuzzCheckMessage(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"thinking","thinking":"t","signature":"s"}],"tool_calls":[{"id":"c","name":"f","arguments":{"a":1}}]}`,
		`{"role":"tool","tool_call_id":"c","content":"r","is_error":true,"name":"f"}`,
		`{"role":"user","content":[{"type":"image","media_type":"image/png","data":"iVBORw0KGgo="}]}`,
		`{"role":"assistant","content":"x","usage":{"input_tokens":3},"metadata":{"k":[[[]]]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		if err := m.UnmarshalJSON(data); err != nil {
			return
		}
		if err := CheckShape(&m); err != nil {
			return
		}
		if err := checkMessageJSON(&m); err != nil {
			return
		}
		enc, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("cannot encode an accepted message: %v", err)
		}
		var back Message
		if err := back.UnmarshalJSON(enc); err != nil {
			t.Fatalf("cannot decode %s: %v", enc, err)
		}
		if err := CheckShape(&back); err != nil {
			t.Fatalf("the validator refuses the round trip of what it accepted: %v\n%s", err, enc)
		}
	})
}
