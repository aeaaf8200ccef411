package compact_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/sessions/message"
)

func ExampleCompact() {
	msgs := []message.Message{
		{Role: message.RoleUser, Text: "List the files."},
		{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "ls", Arguments: map[string]any{"dir": "."}}}},
		{Role: message.RoleTool, ToolCallID: "c1", Name: "ls", Text: "a.go\nb.go\nc.go\nd.go\ne.go"},
		{Role: message.RoleAssistant, Text: "There are five Go files."},
		{Role: message.RoleUser, Text: "Open a.go."},
		{Role: message.RoleAssistant, Text: "Sure."},
	}
	opts := compact.DefaultOptions()
	opts.KeepLast = 1 // the cut snaps back to the last user message
	res, err := compact.Compact(context.Background(), msgs, opts)
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Printf("%s: %s\n---\n", m.Role, m.Text)
	}
	// Output:
	// user: [auto-compacted 4 older messages via observation_mask]
	// [user] List the files.
	// [assistant] called ls(dir=".")
	// [tool ls] a.go [5 lines, 24 chars masked]
	// [assistant] There are five Go files.
	// ---
	// user: Open a.go.
	// ---
	// assistant: Sure.
	// ---
}

func ExampleMicrocompact() {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "ok   step %02d\n", i)
		if i == 20 {
			b.WriteString("main.go:7:2: undefined: x\n")
		}
	}
	fmt.Print(compact.Microcompact(b.String(), 240))
	// Output:
	// ok   step 00
	// ok   step 01
	// ok   step 02
	// [... 18 lines, 234 chars omitted ...]
	// main.go:7:2: undefined: x
	// [... 16 lines, 208 chars omitted ...]
	// ok   step 37
	// ok   step 38
	// ok   step 39
}

func ExampleViewport() {
	msgs := []message.Message{
		{Role: message.RoleUser, Text: "Read both files."},
		{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "a", Name: "read"}, {ID: "b", Name: "read"}}},
		{Role: message.RoleTool, ToolCallID: "a", Text: "contents of a"},
		{Role: message.RoleTool, ToolCallID: "b", Text: "contents of b"},
	}
	fmt.Println(compact.EstimateTokens(msgs[:1]), compact.EstimateTokens(msgs[1:]))
	// 45 tokens hold the tool pair but not the user message before it.
	for _, m := range compact.Viewport(msgs, 45) {
		fmt.Println(strings.TrimSpace(m.Role + " " + m.ToolCallID))
	}
	// Output:
	// 8 40
	// assistant
	// tool a
	// tool b
}

func ExampleEffectiveThreshold() {
	fmt.Println(compact.EffectiveThreshold(48_000, "gpt-4o"))
	fmt.Println(compact.EffectiveThreshold(48_000, "gpt-4"))
	// Output:
	// 48000
	// 5324
}
