package message

import (
	"testing"
)

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
		if err := CheckValues(&m); err != nil {
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
