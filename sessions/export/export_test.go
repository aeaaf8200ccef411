package export

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// exportFixture builds a session through a store, as scripts do: tool
// calls, a trim, a compaction-like replacement, metadata, a summary, a
// fork. It returns the session's record and the messages its message
// events appended, as a HistoryBackend would give them.
func exportFixture(t *testing.T) (*sessions.Record, map[int64]message.Message) {
	t.Helper()
	s := newTestStore(t, sessions.NewMemoryBackend(), 8)
	mustOpen(t, s, "x")
	appended := map[int64]message.Message{}
	add := func(ch *sessions.Change) {
		t.Helper()
		events, err := s.Apply(ctx, "x", ch)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, e := range events {
			if e.Type == sessions.EventMessage {
				appended[e.Seq] = ch.Append[k]
				k++
			}
		}
	}
	add(&sessions.Change{Append: []message.Message{{Role: message.RoleSystem, Text: "be terse"}, {Role: message.RoleUser, Text: "weather?\n\"quoted\" <b>"}}})
	add(&sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "weather", Arguments: map[string]any{"city": "Lisbon", "days": int64(2), "w": 1.0}}}}},
		Events: []sessions.Event{{Type: "tool_call", CorrID: "c1", Data: map[string]any{"name": "weather"}}}})
	add(&sessions.Change{Append: []message.Message{{Role: message.RoleTool, ToolCallID: "c1", Name: "weather", Text: "sunny"}},
		Events: []sessions.Event{{Type: "tool_result", CorrID: "c1", Data: map[string]any{"name": "weather", "status": "ok", "duration_ms": int64(12)}}}})
	add(&sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "Sunny.", Model: "m", Usage: map[string]any{"input_tokens": int64(30), "output_tokens": int64(2)}}},
		Events: []sessions.Event{{Type: "llm_call", Data: map[string]any{"model": "m", "latency_ms": int64(5), "input_tokens": int64(30), "output_tokens": int64(2)}}}})
	add(&sessions.Change{DropFirst: 1, Events: []sessions.Event{{Type: sessions.EventTrim, Data: map[string]any{"dropped": int64(1)}}}})
	summary := "asked about the weather"
	add(&sessions.Change{Replace: true, ReplaceWith: []message.Message{{Role: message.RoleUser, Text: "[summary] " + summary}}, SetSummary: true, Summary: &summary,
		Append: []message.Message{{Role: message.RoleUser, Text: "and tomorrow?", Metadata: map[string]any{"k": []any{int64(1), 2.5, nil}}}},
		Status: sessions.StatusCancelled, AddTurns: 2, MaxTurns: 7, Events: []sessions.Event{{Type: sessions.EventContextCompacted, Data: map[string]any{"messages_after": int64(1)}}}})
	if _, err := s.Fork(ctx, "x", "y", sessions.ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Snapshot(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	return rec, appended
}

// imported is what an import of rec gives back: no children (forks
// record themselves), version 0, times in UTC.
func imported(rec *sessions.Record) *sessions.Record {
	out := *rec
	out.ChildIDs, out.Version = nil, 0
	out.CreatedAt, out.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	out.Events = make([]sessions.Event, len(rec.Events))
	for i, e := range rec.Events {
		e.Time = e.Time.UTC()
		out.Events[i] = e
	}
	return &out
}

func TestExportRoundTrip(t *testing.T) {
	rec, appended := exportFixture(t)
	if len(appended) != 6 {
		t.Fatalf("fixture: %d appended messages", len(appended))
	}
	var jsonl, js bytes.Buffer
	if err := WriteJSONL(&jsonl, rec, appended); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, rec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		appended map[int64]message.Message
	}{{"jsonl", jsonl.Bytes(), appended}, {"json", js.Bytes(), nil}} {
		got, gotAppended, err := ReadExport(bytes.NewReader(tc.data))
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, tc.data)
		}
		if !reflect.DeepEqual(got, imported(rec)) {
			t.Errorf("%s round trip:\n\tgot  %+v\n\twant %+v", tc.name, got, imported(rec))
		}
		if len(gotAppended) != len(tc.appended) || (len(tc.appended) > 0 && !reflect.DeepEqual(gotAppended, tc.appended)) {
			t.Errorf("%s: appended messages %v, want %v", tc.name, gotAppended, tc.appended)
		}
	}
	lines := strings.Split(strings.TrimSpace(jsonl.String()), "\n")
	if want := 1 + len(rec.Events) + len(rec.Messages); len(lines) != want {
		t.Fatalf("%d JSONL lines, want %d", len(lines), want)
	}
	for _, want := range []string{
		`{"_type":"header","version":1,"id":"x","status":"cancelled",`,
		`"message_count":2,"event_count":`,
		`{"_type":"event","seq":1,"type":"session:started","timestamp":"2023-11-14T22:13:20Z","session_id":"x"}`,
		`{"_type":"event","seq":2,"type":"message","timestamp":"2023-11-14T22:13:20Z","session_id":"x","index":0,"role":"system","message":{"id":"m1","created_at":"2023-11-14T22:13:20Z","role":"system","content":"be terse"}}`,
		`"type":"tool_result","timestamp":"2023-11-14T22:13:20Z","session_id":"x","corr_id":"c1","duration_ms":12,"name":"weather","status":"ok"}`,
		`"type":"llm_call",`,
		`"input_tokens":30,"latency_ms":5,"model":"m","output_tokens":2}`,
		`{"_type":"message","index":0,"message":{"id":"m7","created_at":"2023-11-14T22:13:20Z","role":"user","content":"[summary] asked about the weather"}}`,
		`"content":"weather?\n\"quoted\" \u003cb\u003e"`,
	} {
		if !strings.Contains(jsonl.String(), want) {
			t.Errorf("JSONL export lacks %s:\n%s", want, jsonl.String())
		}
	}
	if !strings.HasPrefix(js.String(), "{\n  \"_type\": \"transcript\",\n  \"version\": 1,\n  \"id\": \"x\",") ||
		!strings.Contains(js.String(), `"child_ids": [
    "y"
  ],`) || !strings.Contains(js.String(), `"max_turns": 7`) {
		t.Errorf("JSON export:\n%s", js.String())
	}
}

func TestExportWithoutHistory(t *testing.T) {
	rec, _ := exportFixture(t)
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, rec, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"type":"message","timestamp"`) && strings.Contains(buf.String(), `"role":"system","message"`) {
		t.Fatal("a message event carries a message without history")
	}
	got, appended, err := ReadExport(&buf)
	if err != nil || len(appended) != 0 || !reflect.DeepEqual(got, imported(rec)) {
		t.Fatalf("import: %v, %d appended, %+v", err, len(appended), got)
	}
}

func TestReadExportErrors(t *testing.T) {
	rec, appended := exportFixture(t)
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, rec, appended); err != nil {
		t.Fatal(err)
	}
	good := strings.Split(strings.TrimSpace(buf.String()), "\n")
	header, events, msgs := good[0], good[1:len(rec.Events)+1], good[len(rec.Events)+1:]
	join := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, "\n") + "\n"
	}
	for _, tc := range []struct{ name, input, want string }{
		{"empty", "\n\n", "empty export"},
		{"garbage", "hello", "not a session export (JSON or JSONL)"},
		{"other json", `{"_type":"other"}`, `_type is "other"`},
		{"truncated", join([]string{header}, events, msgs[:1]), "the export is incomplete: 13 events and 1 messages, but its header announces 13 and 2"},
		{"version", strings.Replace(buf.String(), `"version":1`, `"version":9`, 1), "export version 9 is not supported"},
		{"record type", join([]string{header, `{"_type":"footer"}`}), `line 2: unknown record _type 'footer'`},
		{"second header", join([]string{header, header}), "line 2: a second header"},
		{"message order", join([]string{header}, events, msgs[1:], msgs[:1]), "line 15: message record 1 out of order: want index 0"},
		{"seq order", join([]string{header}, events[1:2], events[:1], events[2:], msgs), "event seq 1 follows 2"},
		{"bad status", strings.Replace(buf.String(), `"status":"cancelled"`, `"status":"zombie"`, 1), `line 1: header: unknown status 'zombie'`},
		{"no id", strings.Replace(buf.String(), `"id":"x"`, `"id":""`, 1), "line 1: header: no session id"},
		{"bad time", strings.Replace(buf.String(), `"created_at":"2023`, `"created_at":"yesterday`, 1), "created_at: parsing time"},
		{"invalid transcript", join([]string{strings.Replace(header, `"message_count":2`, `"message_count":1`, 1)}, events,
			[]string{`{"_type":"message","index":0,"message":{"role":"tool","tool_call_id":"nope","content":"x"}}`}),
			`message 0: tool message's tool_call_id "nope" matches no tool call awaiting a result`},
		{"bad message", join([]string{header}, events, msgs[:1], []string{`{"_type":"message","index":1,"message":{"role":"robot"}}`}),
			"message must have a string 'role'"},
		{"foreign event", strings.Replace(buf.String(), `"session_id":"x"`, `"session_id":"z"`, 1), `event 1 belongs to session 'z', not 'x'`},
	} {
		_, _, err := ReadExport(strings.NewReader(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestExportRefusesReservedFields(t *testing.T) {
	rec := &sessions.Record{ID: "r", Status: sessions.StatusActive, Events: []sessions.Event{{Seq: 1, Type: "custom", SessionID: "r", Data: map[string]any{"_type": "x"}}}}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, rec, nil); err == nil || !strings.Contains(err.Error(), `event 1 (custom) has a field "_type"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRename(t *testing.T) {
	rec, _ := exportFixture(t)
	Rename(rec, "copy")
	if rec.ID != "copy" || rec.Events[0].SessionID != "copy" {
		t.Fatalf("%+v", rec)
	}
}

// TestImportMessageIDs: an import keeps the ids and times it is given,
// derives the same ones every time for an export written before messages
// had ids, and refuses an id used twice.
func TestImportMessageIDs(t *testing.T) {
	const head = `{"_type":"transcript","version":1,"id":"s","status":"active","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","title":null,"summary":null,"metadata":{},"parent_id":null,"child_ids":[],"branched_at":null,"turns":0,"max_turns":null,"events":[],"messages":`
	read := func(messages string) (*sessions.Record, error) {
		rec, _, err := ReadExport(strings.NewReader(head + messages + "}"))
		return rec, err
	}
	rec, err := read(`[{"id":"a","created_at":"2026-01-02T03:04:06.5Z","role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if m := rec.Messages[0]; m.ID != "a" || !m.CreatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 6, 5e8, time.UTC)) {
		t.Errorf("given id and time: %q %v", m.ID, m.CreatedAt)
	}
	m := rec.Messages[1]
	if id, err := uuid.Parse(m.ID); err != nil || id.Version() != 7 || !m.CreatedAt.Equal(rec.CreatedAt) {
		t.Errorf("derived id %q (%v), time %v", m.ID, err, m.CreatedAt)
	}
	again, _ := read(`[{"id":"a","role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`)
	if again.Messages[1].ID != m.ID {
		t.Errorf("derived ids differ between imports: %q, %q", again.Messages[1].ID, m.ID)
	}
	if _, err := read(`[{"id":"a","role":"user","content":"hi"},{"id":"a","role":"assistant","content":"hello"}]`); err == nil ||
		!strings.Contains(err.Error(), `message 1: id "a" is message 0's too`) {
		t.Errorf("duplicate id: %v", err)
	}
	if _, err := read(`[{"role":"user","content":"hi","created_at":"yesterday"}]`); err == nil || !strings.Contains(err.Error(), `created_at: "yesterday" is not an RFC 3339 time`) {
		t.Errorf("bad time: %v", err)
	}
}
