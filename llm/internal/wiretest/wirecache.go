package wiretest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions"
)

// conversation returns n messages of an agent conversation with every
// kind of message a provider encodes: user text, an assistant calling two
// tools, their results (one failed), content blocks with an image, a
// system message in the middle, an empty assistant message, and text
// answers.
func conversation(n int) []sessions.Message {
	var out []sessions.Message
	for i := 0; len(out) < n; i++ {
		a, b := fmt.Sprintf("call_%d_a", i), fmt.Sprintf("call_%d_b", i)
		out = append(out,
			sessions.Message{Role: sessions.RoleUser, Text: fmt.Sprintf("step %d", i)},
			sessions.Message{Role: sessions.RoleAssistant, Text: "checking", ToolCalls: []sessions.ToolCall{
				{ID: a, Name: "read", Arguments: map[string]any{"path": "a.txt", "n": int64(i)}},
				{ID: b, Name: "run", Arguments: map[string]any{"argv": []any{"go", "test"}}}}},
			sessions.Message{Role: sessions.RoleTool, ToolCallID: a, Name: "read", Text: "contents"},
			sessions.Message{Role: sessions.RoleTool, ToolCallID: b, Name: "run", Text: "exit 1", IsError: true},
			sessions.Message{Role: sessions.RoleUser, Blocks: []sessions.Block{{Type: sessions.BlockText, Text: "see"},
				{Type: sessions.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
			sessions.Message{Role: sessions.RoleSystem, Text: "be brief"},
			sessions.Message{Role: sessions.RoleAssistant},
			sessions.Message{Role: sessions.RoleAssistant, Text: fmt.Sprintf("answer %d", i)},
		)
	}
	return out[:n]
}

// CheckWireCache checks a provider's use of llm.WireCache: a conversation
// grows a message at a time, as an agent loop's does (sometimes moving to
// a new array, and once reset to a shorter one), and at every step the
// request body encode builds with the cache is byte for byte the body it
// builds without one.
func CheckWireCache(t *testing.T, encode func(*llm.Request) (*wire.JSON, error)) {
	t.Helper()
	all := conversation(60)
	cache := &llm.WireCache{}
	var msgs []sessions.Message
	for i, m := range all {
		if i == 40 {
			msgs = append([]sessions.Message(nil), msgs[:10]...) // a reset: new addresses, fewer messages
		}
		msgs = append(msgs, m)
		req := &llm.Request{Model: "m", System: "you are a test", Messages: msgs, MaxTokens: 100,
			Tools:   []llm.ToolSpec{{Name: "read", Parameters: map[string]any{"type": "object"}}},
			NoCache: i%3 == 0} // prompt-cache breakpoints on most steps, off on some
		want, err := encode(req)
		if err != nil {
			t.Fatalf("step %d without a cache: %v", i, err)
		}
		for range 2 { // the second time every form comes from the cache
			req.Cache = cache
			got, err := encode(req)
			if err != nil {
				t.Fatalf("step %d with the cache: %v", i, err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("step %d: with the cache the body is\n%s\nwithout\n%s", i, got.Bytes(), want.Bytes())
			}
		}
	}
}
