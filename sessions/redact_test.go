package sessions

import (
	"context"
	"strings"
	"testing"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
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
		Append: []message.Message{
			{Role: message.RoleUser, Text: "k=sk-abcdef123456 l=sk-abcdef123456-extended abc", Metadata: map[string]any{"sk-abcdef123456": []any{"x sk-abcdef123456"}}},
			{Role: message.RoleAssistant, Text: "ok", ToolCalls: []message.ToolCall{{ID: "c", Name: "f", Arguments: map[string]any{"a": "sk-abcdef123456"}}}},
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
