package sessions

import (
	"context"
	"strings"
	"testing"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// TestStoreRedacts: every message appended and every event logged has the
// store's known secrets replaced by "<secret NAME>", the longest first;
// short values are left alone.
func TestStoreRedacts(t *testing.T) {
	ctx := context.Background()
	st, err := NewStore(NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	r := st.Redactor()
	r.Add("KEY", "sk-abcdef123456")
	r.Add("LONG", "sk-abcdef123456-extended")
	r.Add("SHORT", "abc")
	if _, err := st.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	_, err = st.Apply(ctx, "s", &Change{
		Append: []Message{
			{Role: RoleUser, Text: "k=sk-abcdef123456 l=sk-abcdef123456-extended abc", Metadata: map[string]any{"sk-abcdef123456": []any{"x sk-abcdef123456"}}},
			{Role: RoleAssistant, Text: "ok", ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: map[string]any{"a": "sk-abcdef123456"}}}},
		},
		Events: []Event{{Type: "note", Data: map[string]any{"msg": "sk-abcdef123456"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Snapshot(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	data, err := jsonvalue.Encode(map[string]any{"m": rec.Messages, "e": rec.Events})
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if strings.Contains(text, "sk-abcdef") {
		t.Errorf("a secret was stored: %s", text)
	}
	for _, want := range []string{`k=\u003csecret KEY\u003e l=\u003csecret LONG\u003e abc`, `\u003csecret KEY\u003e`} {
		if !strings.Contains(text, want) {
			t.Errorf("stored data lacks %s: %s", want, text)
		}
	}
}

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
