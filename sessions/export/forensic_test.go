package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

func forensicLines(t *testing.T, rec *sessions.Record, appended map[int64]message.Message) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteForensic(&buf, rec, appended); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func TestForensicRoundTrip(t *testing.T) {
	rec, appended := exportFixture(t)
	rec.Title = "Weather"
	rec.Metadata = map[string]any{"repo": "api", "n": int64(3)}
	lines := forensicLines(t, rec, appended)
	if len(lines) != 1+len(rec.Events)+1 {
		t.Fatalf("%d lines, want header, %d events and footer", len(lines), len(rec.Events))
	}
	got, gotAppended, err := ReadExport(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, imported(rec)) {
		t.Errorf("round trip:\n\tgot  %+v\n\twant %+v", got, imported(rec))
	}
	if !reflect.DeepEqual(gotAppended, appended) {
		t.Errorf("appended messages %v, want %v", gotAppended, appended)
	}
	// Byte-stable: the same session gives the same bytes.
	if again := forensicLines(t, rec, appended); !reflect.DeepEqual(again, lines) {
		t.Error("a second export differs")
	}
}

// TestForensicFields pins the seed's record shapes and field names.
func TestForensicFields(t *testing.T) {
	rec, appended := exportFixture(t)
	rec.Title = "Weather"
	rec.Metadata = map[string]any{"repo": "api", "n": int64(3)}
	lines := forensicLines(t, rec, appended)
	records := make([]map[string]any, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &records[i]); err != nil {
			t.Fatal(err)
		}
		delete(records[i], "skein")
	}
	want := []string{
		`{"_type":"header","created_at":"2023-11-14T22:13:20Z","id":"x","inputs":{"repo":"api"},"workflow_name":"Weather"}`,
		`{"_type":"event","seq":1,"timestamp":"2023-11-14T22:13:20Z","type":"session:started"}`,
		`{"_type":"event","content":"be terse","seq":2,"timestamp":"2023-11-14T22:13:20Z","type":"system"}`,
		`{"_type":"event","content":"weather?\n\"quoted\" <b>","seq":3,"timestamp":"2023-11-14T22:13:20Z","type":"user"}`,
		`{"_type":"event","meta":{"prompt":"system: be terse\n\nuser: weather?\n\"quoted\" <b>","response":"call weather {\"city\":\"Lisbon\",\"days\":2,\"w\":1.0}"},"seq":4,"timestamp":"2023-11-14T22:13:20Z","type":"assistant"}`,
		`{"_type":"event","corr_id":"c1","parent":4,"seq":5,"timestamp":"2023-11-14T22:13:20Z","tool":"weather","type":"tool_call"}`,
		`{"_type":"event","content":"sunny","corr_id":"c1","parent":5,"seq":6,"success":true,"timestamp":"2023-11-14T22:13:20Z","tool":"weather","type":"tool"}`,
		`{"_type":"event","content":"sunny","corr_id":"c1","duration_ms":12,"parent":5,"seq":7,"success":true,"timestamp":"2023-11-14T22:13:20Z","tool":"weather","type":"tool_result"}`,
		`{"_type":"event","content":"Sunny.","meta":{"model":"m","prompt":"tool weather: sunny","response":"Sunny.","tokens_in":30,"tokens_out":2},"seq":8,"timestamp":"2023-11-14T22:13:20Z","type":"assistant"}`,
		`{"_type":"event","meta":{"latency_ms":5,"model":"m","tokens_in":30,"tokens_out":2},"seq":9,"timestamp":"2023-11-14T22:13:20Z","type":"llm_call"}`,
		`{"_type":"event","seq":10,"timestamp":"2023-11-14T22:13:20Z","type":"trim"}`,
	}
	for i, w := range want {
		got, _ := json.Marshal(records[i])
		got = bytes.ReplaceAll(bytes.ReplaceAll(bytes.ReplaceAll(got, []byte(`\u003c`), []byte("<")), []byte(`\u003e`), []byte(">")), []byte(`\u0026`), []byte("&"))
		if string(got) != w {
			t.Errorf("record %d:\n\tgot  %s\n\twant %s", i, got, w)
		}
	}
	footer, _ := json.Marshal(records[len(records)-1])
	if w := `{"_type":"footer","error":"cancelled","outputs":{},"state":{"child_ids":["y"],"llm_calls":1,"messages":2,"reason":"cancelled","status":"cancelled","tokens_in":30,"tokens_out":2,"turns":2},"status":"failed","updated_at":"2023-11-14T22:13:20Z"}`; string(footer) != w {
		t.Errorf("footer:\n\tgot  %s\n\twant %s", footer, w)
	}
	// Every event record's skein fields hold the event as logged.
	if !strings.Contains(lines[2], `"skein":{"seq":2,"type":"message","data":{"index":0,"role":"system"},"message":{"id":"m1","created_at":"2023-11-14T22:13:20Z","role":"system","content":"be terse"}}`) {
		t.Errorf("event 2: %s", lines[2])
	}
}

func TestForensicFooterStatuses(t *testing.T) {
	for status, want := range map[sessions.Status]string{sessions.StatusActive: "running", sessions.StatusCompleted: "complete", sessions.StatusError: "failed", sessions.StatusCancelled: "failed"} {
		rec := &sessions.Record{ID: "s", Status: status, Messages: []message.Message{{Role: message.RoleUser, Text: "q"}, {Role: message.RoleAssistant, Text: "the answer"}},
			Events: []sessions.Event{{Seq: 1, Type: "error", Data: map[string]any{"error": "boom"}}}}
		lines := forensicLines(t, rec, nil)
		footer := lines[len(lines)-1]
		wantPart := fmt.Sprintf(`{"_type":"footer","status":%q,"result":"the answer",`, want)
		if !strings.HasPrefix(footer, wantPart) || !strings.Contains(footer, `"outputs":{"text":"the answer"}`) {
			t.Errorf("%s: footer %s", status, footer)
		}
		if strings.Contains(footer, `"error":"boom"`) != (want == "failed") {
			t.Errorf("%s: footer error: %s", status, footer)
		}
	}
}

func TestReadForensicErrors(t *testing.T) {
	rec, appended := exportFixture(t)
	lines := forensicLines(t, rec, appended)
	header, events, footer := lines[0], lines[1:len(lines)-1], lines[len(lines)-1]
	join := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, "\n") + "\n"
	}
	dup := append(append(append([]string{}, events[:3]...), events[2]), events[3:]...)
	for _, tc := range []struct{ name, input, want string }{
		{"gap", join([]string{header}, events[:2], events[3:], []string{footer}), "line 4: event seq 4 follows 2: seqs 3 to 3 are missing"},
		{"duplicate", join([]string{header}, dup, []string{footer}), "line 5: event seq 3 repeats"},
		{"no footer", join([]string{header}, events), "no footer after 13 events"},
		{"after footer", join([]string{header}, events, []string{footer, footer}), "a record after the footer"},
		{"count", join([]string{header}, events, []string{strings.Replace(footer, `"event_count":13`, `"event_count":14`, 1)}), "the footer counts 14 events, the log has 13"},
		{"foreign", join([]string{`{"_type":"header","id":"x","workflow_name":"w","created_at":"2023-11-14T22:13:20Z"}`}), `forensic header has no "skein" fields`},
		{"unknown record", join([]string{header, `{"_type":"state"}`}), `line 2: unknown record type 'state'`},
		{"bad time", join([]string{header}, []string{strings.Replace(events[0], `"timestamp":"2023`, `"timestamp":"then`, 1)}, events[1:], []string{footer}), "line 2: event 1: timestamp"},
	} {
		_, _, err := ReadExport(strings.NewReader(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
