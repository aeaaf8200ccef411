package message

import "testing"

// TestRedactEscapedForms: a secret echoed JSON-escaped or URL-encoded is
// recognised, and so is one in a message's tool names, call ids and
// model.
func TestRedactEscapedForms(t *testing.T) {
	r := NewRedactor()
	const v = `sk/9d8e"7f<6a>5b&4c d\e`
	r.Add("K", v)
	for _, echoed := range []string{
		v,
		`sk/9d8e\"7f<6a>5b&4c d\\e`,  // JSON
		`sk\/9d8e\"7f<6a>5b&4c d\\e`, // JSON with \/
		`sk/9d8e\"7f\u003c6a\u003e5b\u00264c d\\e`, // JSON, HTML-escaped
		`sk%2F9d8e%227f%3C6a%3E5b%264c+d%5Ce`,      // query escaping
		`sk%2f9d8e%227f%3c6a%3e5b%264c+d%5ce`,      // lowercase hex
		`sk%2F9d8e%227f%3C6a%3E5b&4c%20d%5Ce`,      // path escaping
	} {
		if got := r.Redact("x " + echoed + " y"); got != "x <secret K> y" {
			t.Errorf("%s: redacted to %q", echoed, got)
		}
	}
	m := r.RedactMessage(Message{Role: RoleAssistant, Model: "m-" + v, ToolCalls: []ToolCall{{ID: "call_" + v, Name: "f_" + v}}})
	if m.Model != "m-<secret K>" || m.ToolCalls[0].ID != "call_<secret K>" || m.ToolCalls[0].Name != "f_<secret K>" {
		t.Errorf("assistant message: %+v", m)
	}
	m = r.RedactMessage(Message{Role: RoleTool, ToolCallID: "call_" + v, Name: "f_" + v, Text: "ok"})
	if m.ToolCallID != "call_<secret K>" || m.Name != "f_<secret K>" {
		t.Errorf("tool message: %+v", m)
	}
}
