package message

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// TestJSONRoundTripKeepsNumberTypes checks that the stored encoding of
// messages gives back int64 and float64 values as they were,
// whole-number floats included (internal/jsonvalue checks bare values).
func TestJSONRoundTripKeepsNumberTypes(t *testing.T) {
	values := map[string]any{
		"int": int64(2), "float": 2.0, "neg": -3.0, "frac": 0.25, "big": 1e300, "tiny": 1e-9,
		"max": int64(math.MaxInt64), "list": []any{1.0, int64(1), "x", nil, true},
		"nested": map[string]any{"f": 10.0, "deeper": []any{map[string]any{"g": 7.0}}},
	}
	m := Message{Role: RoleAssistant, Text: "hi", Metadata: values, Usage: map[string]any{"cost": 1.0},
		ToolCalls: []ToolCall{{ID: "a", Name: "f", Arguments: map[string]any{"n": int64(1)}},
			{ID: "b", Name: "g", Arguments: map[string]any{"x": 4.0}}}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var mb Message
	if err := json.Unmarshal(data, &mb); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mb, m) {
		t.Errorf("message round trip:\n got %#v\nwant %#v", mb, m)
	}
	if _, ok := m.ToolCalls[1].Arguments["x"].(float64); !ok {
		t.Errorf("MarshalJSON changed the message's own arguments")
	}

}

// TestDeepMessage: a message nested a million levels is a DepthError
// naming its path, not a stack overflow.
func TestDeepMessage(t *testing.T) {
	nested := func(open, close string, n int) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	var m Message
	err := m.UnmarshalJSON([]byte(`{"role":"assistant","content":"x","tool_calls":[{"id":"c","name":"f","arguments":{"a":` + nested("[", "]", 1_000_000) + `}}]}`))
	if err == nil || !strings.Contains(err.Error(), `at .tool_calls[0].arguments.a[0][0]`) {
		t.Errorf("a message with deep arguments: %v", err)
	}
}

// fastSamples are messages in every stored form: the fast path must
// decode all of them itself.
func fastSamples() []Message {
	return []Message{
		{Role: RoleUser, Text: "hello"},
		{Role: RoleSystem, Text: "Quotes \" and \\ backslashes, <tags> & unicode: héllo 世界 🎉\t\n\r\b\f \x01 \u2028 \u2029 /"},
		{Role: RoleUser, Blocks: []Block{{Type: BlockText, Text: "look"}, {Type: BlockImage, MediaType: "image/png", Data: "iVBORw0K"}},
			Metadata: map[string]any{"n": int64(2), "f": 0.75, "w": 2.0, "z": 0.0, "neg": -3.5e-7, "big": int64(math.MaxInt64),
				"min": int64(math.MinInt64), "huge": 1e300, "tags": []any{"a", int64(1), 1.5, true, false, nil, []any{}, map[string]any{}},
				"nested": map[string]any{"k": map[string]any{"deep": []any{map[string]any{"x": int64(-3)}}}}, "ключ \"q\"": "v"}},
		{Role: RoleAssistant, Blocks: []Block{{Type: BlockThinking, Thinking: "hmm", Signature: "c2ln"}, {Type: BlockRedactedThinking, Data: "ZW5j"},
			{Type: BlockThinking, Origin: "gemini", Data: `[{"text":"a","thoughtSignature":"c2ln"}]`}, {Type: BlockText, Text: "ok"}},
			ToolCalls: []ToolCall{{ID: "c1", Name: "search", Arguments: map[string]any{"q": "x", "n": int64(3), "f": 3.0, "o": map[string]any{"on": true}}},
				{ID: "c2", Name: "noop", Arguments: map[string]any{}}},
			Model: "m", Usage: map[string]any{"input_tokens": int64(10), "cost": 0.01}},
		{Role: RoleTool, ToolCallID: "c1", Name: "search", Text: "result"},
		{Role: RoleTool, ToolCallID: "c2", Name: "noop", IsError: true, Text: ""},
		{Role: RoleAssistant, Model: "m"},
		{Role: RoleUser, Blocks: []Block{}},
		{Role: RoleUser, Text: strings.Repeat("long ", 500)},
	}
}

func TestFastMessageDecodesStoredForms(t *testing.T) {
	for i, m := range fastSamples() {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var fast, slow Message
		if err := fastMessage(data, &fast); err != nil {
			t.Fatalf("sample %d: the fast path gave up on %s: %v", i, data, err)
		}
		if err := slow.unmarshalSlow(data); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, m) {
			t.Fatalf("sample %d:\n\tfast %#v\n\tslow %#v\n\twant %#v", i, fast, slow, m)
		}
	}
}

// TestFastPathAgrees decodes texts that exercise the fast path's edges
// and checks that UnmarshalJSON gives what encoding/json gives, whether
// the fast path took them or not.
func TestFastPathAgrees(t *testing.T) {
	messages := []struct {
		json string
		fast bool // the fast path decodes it itself
	}{
		{`{"role":"user","content":"\ud83c\udf89 \u00e9\/\"\\"}`, true},
		{` { "role" : "user" , "content" : [ ] , "metadata" : null } `, true},
		{`{"role":"assistant","tool_calls":[{"id":"a","name":"b"}]}`, true},
		{`{"role":"assistant","tool_calls":[{"id":"a","name":"b","arguments":null}]}`, true},
		{`{"role":"user","content":null,"usage":{"x":1e2,"y":-0,"z":12345678901234567890}}`, true},
		{`{"Role":"user"}`, false},
		{`{"role":"user","role":"system"}`, false},
		{`{"role":"user","content":"a","content":[]}`, false},
		{`{"role":"user","content":"\ud800"}`, false},
		{"{\"role\":\"user\",\"content\":\"\xff\"}", false},
		{`{"role":null}`, false},
		{`{"role":"user","extra":1}`, false},
		{`{"role":"user","tool_calls":null}`, false},
		{`{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}`, false},
		{`{"role":"user","metadata":{"n":01}}`, false},
		{`{"role":"user","metadata":{"n":1e999}}`, false},
		{`{"role":"user"} x`, false},
		{`{"role":"user",}`, false},
		{`{"role":"user","content":5}`, false},
		{`{"role":"assistant","tool_calls":[{"id":"a","arguments":[1]}]}`, false},
	}
	for _, tc := range messages {
		var fast Message
		fastErr := fastMessage([]byte(tc.json), &fast)
		if (fastErr == nil) != tc.fast {
			t.Errorf("%s: fast path error %v, want fast = %v", tc.json, fastErr, tc.fast)
		}
		if fastErr != nil && !errors.Is(fastErr, jsonvalue.ErrSlow) {
			t.Errorf("%s: the fast path failed with %v instead of giving up", tc.json, fastErr)
		}
		var got, want Message
		gotErr, wantErr := got.UnmarshalJSON([]byte(tc.json)), want.unmarshalSlow([]byte(tc.json))
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n\tgot  %#v, %v\n\twant %#v, %v", tc.json, got, gotErr, want, wantErr)
		}
	}
}

// FuzzFastMessage checks that whatever the fast path decodes, it decodes
// as encoding/json does.
func FuzzFastMessage(f *testing.F) {
	for _, m := range fastSamples() {
		data, _ := json.Marshal(m)
		f.Add(data)
	}
	f.Add([]byte(`{"role":"user","content":"\ud83c\udf89"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow Message
		if fastMessage(data, &fast) != nil {
			return
		}
		if err := slow.unmarshalSlow(data); err != nil {
			t.Fatalf("%q: the fast path decoded what encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\n\tfast %#v\n\tslow %#v", data, fast, slow)
		}
		checkAppendJSON(t, &fast)
	})
}

// TestAppendJSONIsMarshal checks that MarshalJSON's fast path writes what
// encoding/json writes, for every sample message.
func TestAppendJSONIsMarshal(t *testing.T) {
	created := time.Date(2026, 11, 26, 6, 30, 0, 123456789, time.FixedZone("x", 3600))
	samples := append(fastSamples(),
		Message{ID: "m<1>", CreatedAt: created, Role: RoleAssistant, Text: "a \u2028 \"b\" & <c>", Model: "é",
			ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: map[string]any{"x": 2.0, "y": []any{int64(1)}}}, {ID: "c2", Name: "g"}},
			Metadata:  map[string]any{"k": map[string]any{"n": nil}}, Usage: map[string]any{"input_tokens": int64(3)}},
		Message{Role: RoleTool, ToolCallID: "c1", Name: "f", Text: "", IsError: true},
		Message{Role: RoleUser, Text: "x", Metadata: map[string]any{"odd": map[string]string{"a": "b"}}}, // left to marshalSlow
	)
	for i := range samples {
		checkAppendJSON(t, &samples[i])
	}
}

// checkAppendJSON fails t when MarshalJSON's output differs from
// marshalSlow's.
func checkAppendJSON(t *testing.T, m *Message) {
	t.Helper()
	want, werr := m.marshalSlow()
	got, err := m.MarshalJSON()
	if string(got) != string(want) || (err == nil) != (werr == nil) {
		t.Fatalf("MarshalJSON(%#v):\n\tgot  %s (%v)\n\twant %s (%v)", m, got, err, want, werr)
	}
}
