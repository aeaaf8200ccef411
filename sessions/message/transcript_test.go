package message

import (
	"fmt"
	"strings"
	"testing"
)

func msgs(prefix string, n int) []Message {
	out := make([]Message, n)
	for i := range out {
		out[i] = Message{Role: RoleUser, Text: fmt.Sprintf("%s%d", prefix, i)}
	}
	return out
}

func texts(v View) []string {
	out := make([]string, v.Len())
	for i := range out {
		out[i] = v.At(i).Text
	}
	return out
}

func TestTranscriptForkIsolation(t *testing.T) {
	parent := Transcript{}.Append(msgs("p", 3)...)
	child := parent.Fork()
	parent = parent.Append(Message{Role: RoleUser, Text: "parent-only"})
	child = child.Append(Message{Role: RoleUser, Text: "child-only"})
	grandchild := child.Fork()
	child = child.Append(Message{Role: RoleUser, Text: "child-2"})
	grandchild = grandchild.Append(Message{Role: RoleUser, Text: "grand-only"})

	want := map[string][]string{
		"parent":     {"p0", "p1", "p2", "parent-only"},
		"child":      {"p0", "p1", "p2", "child-only", "child-2"},
		"grandchild": {"p0", "p1", "p2", "child-only", "grand-only"},
	}
	for name, tr := range map[string]Transcript{"parent": parent, "child": child, "grandchild": grandchild} {
		if got := fmt.Sprint(texts(tr)); got != fmt.Sprint(want[name]) {
			t.Errorf("%s = %v, want %v", name, got, want[name])
		}
		if got := fmt.Sprint(textsOf(tr.Slice())); got != fmt.Sprint(want[name]) {
			t.Errorf("%s.Slice() = %v, want %v", name, got, want[name])
		}
	}
}

func textsOf(ms []Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].Text
	}
	return out
}

func TestTranscriptHead(t *testing.T) {
	base := Transcript{}.Append(msgs("a", 4)...)
	f := base.Fork().Append(msgs("b", 3)...)
	want := fmt.Sprint(texts(f))
	for n := 0; n <= f.Len(); n++ {
		h := f.Head(n)
		if h.Len() != n {
			t.Fatalf("Head(%d).Len() = %d", n, h.Len())
		}
		h = h.Append(Message{Role: RoleUser, Text: "new"})
		if h.Len() != n+1 || h.At(n).Text != "new" {
			t.Fatalf("appending to Head(%d) gave %v", n, texts(h))
		}
		if got := fmt.Sprint(texts(f)); got != want {
			t.Fatalf("appending to Head(%d) changed the source to %s", n, got)
		}
	}
}

func TestTranscriptDeepForksStayBounded(t *testing.T) {
	tr := Transcript{}.Append(msgs("x", 1)...)
	for i := 0; i < 200; i++ {
		tr = tr.Fork().Append(Message{Role: RoleUser, Text: fmt.Sprint(i)})
	}
	if tr.depth > maxDepth {
		t.Fatalf("depth %d exceeds %d", tr.depth, maxDepth)
	}
	if tr.Len() != 201 || tr.At(200).Text != "199" || tr.At(0).Text != "x0" {
		t.Fatalf("wrong content after deep forks: len %d", tr.Len())
	}
}

func TestTranscriptTail(t *testing.T) {
	tr := Transcript{}.Append(msgs("m", 5)...)
	if got := fmt.Sprint(texts(tr.Tail(2))); got != "[m3 m4]" {
		t.Fatalf("Tail(2) = %s", got)
	}
	if tr.Tail(10).Len() != 5 || tr.Tail(0).Len() != 0 {
		t.Fatal("Tail does not clamp")
	}
}

func TestValidate(t *testing.T) {
	call := func(ids ...string) Message {
		m := Message{Role: RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: "f", Arguments: map[string]any{}})
		}
		return m
	}
	result := func(id string) Message {
		return Message{Role: RoleTool, ToolCallID: id, Text: "ok"}
	}
	user := Message{Role: RoleUser, Text: "q"}
	tests := []struct {
		name string
		msgs []Message
		err  string
	}{
		{"empty", nil, ""},
		{"pair", []Message{user, call("a"), result("a"), {Role: RoleAssistant, Text: "done"}}, ""},
		{"parallel any order", []Message{user, call("a", "b"), result("b"), result("a")}, ""},
		{"orphan result", []Message{user, result("a")}, `message 1: tool message's tool_call_id "a" matches no tool call awaiting a result`},
		{"interleaved user", []Message{call("a"), user, result("a")}, `message 1: tool calls 'a' have no results yet; a user message cannot follow them`},
		{"open at end", []Message{user, call("a", "b"), result("a")}, `tool calls 'b' have no results`},
		{"result of older turn", []Message{call("a"), result("a"), call("b"), result("a")}, `message 3: tool message's tool_call_id "a" matches no tool call`},
		{"bad role", []Message{{Role: "bot"}}, "message 0: message must have a string 'role'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.msgs)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestMessageJSONRoundTrip(t *testing.T) {
	in := []Message{
		{Role: RoleUser, Blocks: []Block{{Type: BlockText, Text: "hi"}, {Type: BlockImage, MediaType: "image/png", Data: "AA=="}}},
		{Role: RoleAssistant, Text: "x", ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: map[string]any{"n": int64(3), "f": 1.5, "l": []any{"a", nil, true}}}},
			Model: "m", Usage: map[string]any{"input_tokens": int64(5)}},
		{Role: RoleTool, ToolCallID: "c", Name: "f", IsError: true, Text: "boom", Metadata: map[string]any{"k": map[string]any{"z": int64(-1)}}},
		{Role: RoleUser, Blocks: []Block{}},
	}
	for _, m := range in {
		data, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var out Message
		if err := out.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%#v", out) != fmt.Sprintf("%#v", m) {
			t.Errorf("round trip changed the message:\n got %#v\nwant %#v", out, m)
		}
	}
}
