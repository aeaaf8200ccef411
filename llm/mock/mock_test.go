package mock

import (
	"context"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, text string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything\nat all", true},
		{"*weather*", "what is the\nweather like", true},
		{"weather", "weather today", false},
		{"w?ather*", "weather today", true},
		{"*a*b*c", "xxaxxbxxc", true},
		{"*a*b*c", "xxaxxcxxb", false},
		{"", "", true},
		{"héllo*", "héllo wörld", true},
	} {
		if got := Glob(tc.pattern, tc.text); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v", tc.pattern, tc.text, got)
		}
	}
}

func TestLoadFixture(t *testing.T) {
	src := `# comment
{"text": "hi", "input_tokens": 3, "request": {"prompt": "ignored"}}

{"tool_calls": [{"name": "f", "arguments": {"a": 1}}], "match": "*x*", "consume_match": true}
{"error": {"category": "rate_limit", "retry_after_ms": 20}}
`
	resps, err := LoadFixture(strings.NewReader(src), "f.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(resps) != 3 || resps[0].Text != "hi" || resps[0].InputTokens != 3 || resps[0].OutputTokens != -1 {
		t.Fatalf("resps[0] = %+v", resps[0])
	}
	if resps[1].ToolCalls[0].Arguments["a"] != int64(1) || !resps[1].ConsumeMatch || resps[1].Match != "*x*" {
		t.Fatalf("resps[1] = %+v", resps[1])
	}
	if resps[2].Error.Category != llm.RateLimit || resps[2].Error.RetryAfter.Milliseconds() != 20 || resps[2].Error.Message == "" {
		t.Fatalf("resps[2] = %+v", resps[2].Error)
	}
	for _, bad := range []struct{ src, err string }{
		{`{"text": 1}`, "f.jsonl:1: 'text' must be a string, got number"},
		{"\n{not json", "f.jsonl:2: "},
		{`{"tool_calls": [{}]}`, "f.jsonl:1: tool_calls[0] must have a non-empty string 'name'"},
		{`{"error": {"message": "x"}}`, "f.jsonl:1: 'error' needs a 'category'"},
	} {
		if _, err := LoadFixture(strings.NewReader(bad.src), "f.jsonl"); err == nil || !strings.HasPrefix(err.Error(), bad.err) {
			t.Errorf("LoadFixture(%q) = %v, want %q", bad.src, err, bad.err)
		}
	}
}

func TestFixtureLineRoundTrips(t *testing.T) {
	resp := &llm.Response{Text: "t", Model: "m", ToolCalls: []message.ToolCall{{ID: "x", Name: "f", Arguments: map[string]any{"k": "v"}}},
		Thinking: []message.Block{{Type: message.BlockThinking, Thinking: "hmm", Signature: "s"}}, Usage: llm.Usage{InputTokens: 5, OutputTokens: 2}}
	line, err := FixtureLine(resp)
	if err != nil {
		t.Fatal(err)
	}
	resps, err := LoadFixture(strings.NewReader(string(line)), "x")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	m.Queue(resps[0])
	got, err := m.Wrap(Name, nil, nil).Complete(context.Background(), &llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "t" || got.Model != "m" || got.ToolCalls[0].Name != "f" || got.ToolCalls[0].Arguments["k"] != "v" ||
		got.Usage != resp.Usage || got.Thinking[0].Thinking != "hmm" {
		t.Fatalf("replayed %+v", got)
	}
}

func TestReplayFailsWhenEmpty(t *testing.T) {
	m := New()
	m.SetReplay(Replay{Fixture: "rec.jsonl"})
	_, err := m.Wrap("openai", nil, nil).Complete(context.Background(), &llm.Request{Messages: []message.Message{{Role: "user", Text: "plan my week please"}}})
	if err == nil || err.Error() != `llm replay: no fixture left in rec.jsonl for the request starting "plan my week please"` {
		t.Fatalf("err = %v", err)
	}
}

// TestFixtureRepliesAreCheckedLikeMessages: a fixture line whose reply
// would be an invalid assistant message is refused when the fixture
// loads, by the validator of agent_session_inject and imports.
func TestFixtureRepliesAreCheckedLikeMessages(t *testing.T) {
	_, err := LoadFixture(strings.NewReader("{\"text\": \"ok\"}\n{\"text\": \"x\", \"tool_calls\": []}\n"), "f.jsonl")
	if err == nil || !strings.Contains(err.Error(), "f.jsonl:2: 'tool_calls' is an empty list") {
		t.Fatalf("LoadFixture: %v, want the empty tool_calls of line 2 refused", err)
	}
}
