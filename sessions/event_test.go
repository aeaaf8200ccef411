package sessions

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestEventJSONKeepsNumberTypes checks that the stored encoding of events
// gives back int64 and float64 values as they were, whole-number floats
// included (package message checks messages' own).
func TestEventJSONKeepsNumberTypes(t *testing.T) {
	e := Event{Seq: 3, Type: "llm_call", SessionID: "s", Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Data: map[string]any{"latency_s": 1.0, "tokens": int64(5)}}
	data, err := json.Marshal(e)
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
