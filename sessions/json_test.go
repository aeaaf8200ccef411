package sessions

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestJSONRoundTripKeepsNumberTypes checks that the stored encodings of
// messages and events give back int64 and float64 values as they were,
// whole-number floats included.
func TestJSONRoundTripKeepsNumberTypes(t *testing.T) {
	values := map[string]any{
		"int": int64(2), "float": 2.0, "neg": -3.0, "frac": 0.25, "big": 1e300, "tiny": 1e-9,
		"max": int64(math.MaxInt64), "list": []any{1.0, int64(1), "x", nil, true},
		"nested": map[string]any{"f": 10.0, "deeper": []any{map[string]any{"g": 7.0}}},
	}
	for _, v := range []any{2.0, -0.5, 1e21, []any{3.0}, values} {
		data, err := EncodeJSON(v)
		if err != nil {
			t.Fatalf("EncodeJSON(%v): %v", v, err)
		}
		back, err := DecodeJSON(data)
		if err != nil {
			t.Fatalf("DecodeJSON(%s): %v", data, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Errorf("EncodeJSON then DecodeJSON: got %#v from %s, want %#v", back, data, v)
		}
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

	e := Event{Seq: 3, Type: "llm_call", SessionID: "s", Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Data: map[string]any{"latency_s": 1.0, "tokens": int64(5)}}
	data, err = json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var eb Event
	if err := json.Unmarshal(data, &eb); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(eb, e) {
		t.Errorf("event round trip:\n got %#v\nwant %#v", eb, e)
	}
}
