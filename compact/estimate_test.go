package compact

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

func TestEstimateText(t *testing.T) {
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog, again and again. ", 10)
	json := `{"path": "src/main.go", "line": 12, "matches": [{"text": "func main() {"}, {"text": "}"}]}`
	code := "func main() {\n\tfmt.Println(\"hi\")\n\tif x := f(); x != nil {\n\t\treturn\n\t}\n}\n"
	markdown := "Use `go test` to run the tests, then check the output: it should say ok. " +
		"If it fails, read the first error and fix that file before anything else."
	for _, tt := range []struct {
		name string
		text string
		want int
	}{
		{"empty", "", 0},
		{"prose, 4 bytes per token", prose, (len(prose) + 3) / 4},
		{"one byte rounds up", "a", 1},
		{"JSON, 2 bytes per token", json, (len(json) + 1) / 2},
		{"JSON array after spaces", "  [1, 2, 3]", 6},
		{"code", code, (len(code) + 1) / 2},
		{"prose with a little markup", markdown, (len(markdown) + 3) / 4},
		{"long prose judged by a sample", strings.Repeat(prose, 20), (20*len(prose) + 3) / 4},
		{"long code judged by a sample", strings.Repeat(code, 40), (40*len(code) + 1) / 2},
	} {
		if got := EstimateText(tt.text); got != tt.want {
			t.Errorf("%s: EstimateText = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestEstimateMessage(t *testing.T) {
	prose := strings.Repeat("word ", 40) // 200 bytes: 50 tokens as prose, 100 as dense
	for _, tt := range []struct {
		name string
		m    message.Message
		want int
	}{
		{"user text", user(prose), 4 + 50},
		{"tool result is dense", result("c", "run", prose), 4 + 100},
		{"tool result blocks are dense", message.Message{Role: message.RoleTool, ToolCallID: "c",
			Blocks: []message.Block{{Type: message.BlockText, Text: prose}}}, 4 + 100},
		{"blocks", message.Message{Role: message.RoleUser, Blocks: []message.Block{
			{Type: message.BlockText, Text: prose},
			{Type: message.BlockImage, MediaType: "image/png", Data: strings.Repeat("A", 5000)},
		}}, 4 + 50 + 1000},
		{"thinking", message.Message{Role: message.RoleAssistant, Blocks: []message.Block{
			{Type: message.BlockThinking, Thinking: prose, Signature: "sig"},
		}}, 4 + 50},
		// name (9) + {"path":"a.go","n":12,"f":0.5,"l":[true,null],"m":{}} (53) = 62 bytes: 31 tokens.
		{"tool call", asst("", call("id1", "read_file", map[string]any{
			"path": "a.go", "n": int64(12), "f": 0.5, "l": []any{true, nil}, "m": map[string]any{},
		})), 4 + 4 + 31},
		{"metadata does not count", message.Message{Role: message.RoleUser, Text: "hi",
			Metadata: map[string]any{"k": prose}, Usage: map[string]any{"input_tokens": int64(5)}}, 4 + 1},
	} {
		if got := EstimateMessage(&tt.m); got != tt.want {
			t.Errorf("%s: EstimateMessage = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestEstimateTokensAdditive(t *testing.T) {
	msgs := session()
	sum := 0
	for i := range msgs {
		sum += EstimateMessage(&msgs[i])
	}
	if got := EstimateTokens(msgs); got != sum || got != EstimateTokens(msgs[:4])+EstimateTokens(msgs[4:]) {
		t.Errorf("EstimateTokens = %d, want the sum %d", got, sum)
	}
}

func TestEstimateTokensDoesNotAllocate(t *testing.T) {
	msgs := session()
	msgs = append(msgs, asst("", call("z", "f", map[string]any{"x": 1.25, "y": []any{int64(1), "s", map[string]any{"k": false}}})),
		message.Message{Role: message.RoleTool, ToolCallID: "z", Blocks: []message.Block{{Type: message.BlockText, Text: "ok"}}})
	if n := testing.AllocsPerRun(100, func() { EstimateTokens(msgs) }); n != 0 {
		t.Errorf("EstimateTokens allocates %v times per run", n)
	}
}
