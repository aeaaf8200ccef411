package anthropic_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/sessions/message"
)

// testKey is an obviously fake key; tests check it never leaks.
const testKey = "sk-ant-test-not-a-real-key"

func newProvider(t *testing.T, srv *wiretest.Server, edit ...func(*anthropic.Config)) *anthropic.Provider {
	t.Helper()
	cfg := anthropic.Config{BaseURL: srv.URL, APIKey: testKey}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func file(t *testing.T, name string) string { return wiretest.Read(t, "testdata/"+name) }

func TestToolWithoutArguments(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "no_args_tool.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-haiku-4-5", Messages: []message.Message{wiretest.User("list files")}, Tools: []llm.ToolSpec{{Name: "list_files"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []message.ToolCall{{ID: "toolu_01NoArgs", Name: "list_files", Arguments: map[string]any{}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopToolUse {
		t.Errorf("got %+v", resp)
	}
}

// TestCompleteToolUse reads thinking, text and tool calls from one JSON body.
func TestCompleteToolUse(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "tool_use_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []message.Message{wiretest.User("go")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:     "Checking both.",
		Thinking: []message.Block{{Type: "thinking", Thinking: "Two cities, two calls.", Signature: "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL=="}},
		ToolCalls: []message.ToolCall{
			{ID: "toolu_paris", Name: "get_weather", Arguments: map[string]any{"location": "Paris", "days": int64(2)}},
			{ID: "toolu_ping", Name: "ping", Arguments: map[string]any{}},
		},
		Usage:      llm.Usage{InputTokens: 700, OutputTokens: 150},
		StopReason: llm.StopToolUse,
		Model:      "claude-sonnet-4-5-20250929",
		Provider:   "anthropic",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
}

func TestUnknownEventsIgnored(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "unknown_events.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []message.Message{wiretest.User("search")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Found it." || len(resp.ToolCalls) != 0 || resp.StopReason != llm.StopEnd {
		t.Errorf("got %+v", resp)
	}
}

// TestRequestMapping covers system messages, merging of same-role turns,
// images, blocks the API would refuse, and the request options.
func TestRequestMapping(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	temp := 0.25
	p := newProvider(t, srv, func(c *anthropic.Config) { c.DefaultMaxTokens = 1000 })
	_, err := p.Complete(context.Background(), &llm.Request{
		Model:  "claude-sonnet-4-5",
		System: "You are terse.",
		Messages: []message.Message{
			{Role: message.RoleUser, Blocks: []message.Block{
				{Type: message.BlockText, Text: "What is in this picture?"},
				{Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
			}},
			wiretest.User("Answer in one word."),
			{Role: message.RoleAssistant, Blocks: []message.Block{
				{Type: message.BlockThinking, Thinking: "from another provider, unsigned"},
				{Type: message.BlockText, Text: ""},
				{Type: message.BlockText, Text: "Square."},
			}},
			{Role: message.RoleSystem, Text: "Answer in French from now on."},
			wiretest.User("And now?"),
			{Role: message.RoleAssistant, Text: ""},
			wiretest.User("Well?"),
		},
		Tools:       []llm.ToolSpec{wiretest.WeatherTool, {Name: "ping", Description: "Checks the connection."}},
		ToolChoice:  "required",
		Temperature: &temp,
		Stop:        []string{"END"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/request_mapping.golden.json", srv.Requests()[0].Body)
}

func TestToolChoice(t *testing.T) {
	tests := []struct {
		choice string
		tools  []llm.ToolSpec
		want   any
	}{
		{"", []llm.ToolSpec{wiretest.WeatherTool}, nil},
		{"auto", []llm.ToolSpec{wiretest.WeatherTool}, map[string]any{"type": "auto"}},
		{"none", []llm.ToolSpec{wiretest.WeatherTool}, map[string]any{"type": "none"}},
		{"required", []llm.ToolSpec{wiretest.WeatherTool}, map[string]any{"type": "any"}},
		{"get_weather", []llm.ToolSpec{wiretest.WeatherTool}, map[string]any{"type": "tool", "name": "get_weather"}},
		{"required", nil, nil},
	}
	for _, tt := range tests {
		srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
		if _, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []message.Message{wiretest.User("hi")}, Tools: tt.tools, ToolChoice: tt.choice, MaxTokens: 64}); err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.Unmarshal(srv.Requests()[0].Body, &body)
		if !reflect.DeepEqual(body["tool_choice"], tt.want) {
			t.Errorf("tool choice %q: sent %v, want %v", tt.choice, body["tool_choice"], tt.want)
		}
		if body["max_tokens"] != 64.0 {
			t.Errorf("max_tokens %v", body["max_tokens"])
		}
	}
}

func TestErrors(t *testing.T) {
	protocol.CheckErrors(t, []wiretest.ErrorCase{
		{Name: "overloaded 529", Reply: wiretest.JSON(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`).With("X-Should-Retry", "true"), Category: llm.Overloaded, Status: 529, Msg: "http 529: overloaded_error: Overloaded"},
		{Name: "overloaded as a 429", Reply: wiretest.JSON(429, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), Category: llm.Overloaded, Status: 429},
		{Name: "should not retry", Reply: wiretest.JSON(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`).With("X-Should-Retry", "false"), Category: llm.ServerError, Status: 500, NoRetry: true},
		{Name: "retry-after date", Reply: wiretest.JSON(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`).With("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT"), Category: llm.RateLimit, Status: 429},
		{Name: "input and max_tokens exceed the window", Reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and `+"`max_tokens`"+` exceed context limit: 187254 + 20000 > 200000, decrease input length or `+"`max_tokens`"+` and try again"}}`), Category: llm.ContextLength, Status: 400},
		{Name: "credit balance", Reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`), Category: llm.Auth, Status: 400},
		{Name: "billing error", Reply: wiretest.JSON(402, `{"type":"error","error":{"type":"billing_error","message":"Payment required"}}`).With("X-Should-Retry", "true"), Category: llm.Auth, Status: 402},
		{Name: "permission", Reply: wiretest.JSON(403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`), Category: llm.Auth, Status: 403},
		{Name: "unknown model", Reply: wiretest.JSON(404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`), Category: llm.InvalidRequest, Status: 404},
		{Name: "too large", Reply: wiretest.JSON(413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`), Category: llm.InvalidRequest, Status: 413},
		{Name: "html 529", Reply: wiretest.Reply{Status: 529, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>Site overloaded</body></html>"}, Category: llm.Overloaded, Status: 529, Msg: "http 529: <html><body>Site overloaded</body></html>"},
		{Name: "plain text 502", Reply: wiretest.Reply{Status: 502, Body: "  upstream connect error or disconnect/reset before headers\n"}, Category: llm.ServerError, Status: 502, Msg: "http 502: upstream connect error or disconnect/reset before headers"},
		{Name: "empty 503", Reply: wiretest.Reply{Status: 503}, Category: llm.Overloaded, Status: 503, Msg: "http 503: Service Unavailable"},
		{Name: "mid-stream api error", Reply: wiretest.SSE("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n"), Stream: true, Category: llm.ServerError},
		{Name: "malformed event", Reply: wiretest.SSE("event: message_start\ndata: {\"type\":\n\n"), Stream: true, Category: llm.ServerError, Msg: "malformed stream event"},
		{Name: "error body with 200", Reply: wiretest.JSON(200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), Category: llm.Overloaded},
	})
}

// TestOverloadedThenFallback: Anthropic stays overloaded through every
// retry; the fallback chain then asks OpenAI, which answers.
func TestOverloadedThenFallback(t *testing.T) {
	overloaded := wiretest.JSON(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	ant := wiretest.NewServer(t, overloaded, overloaded, overloaded)
	oai := wiretest.NewServer(t, wiretest.JSON(200, `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from OpenAI."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`))
	second, err := openai.New(openai.Config{BaseURL: oai.URL + "/v1", APIKey: "sk-test-not-a-real-key"})
	if err != nil {
		t.Fatal(err)
	}
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	chain := []llm.Target{{Provider: newProvider(t, ant)}, {Provider: second, Model: "gpt-4.1"}}
	resp, err := llm.Fallback(context.Background(), chain, policy, &llm.Request{Model: "claude-sonnet-4-5", Messages: []message.Message{wiretest.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "openai" || resp.Text != "Hello from OpenAI." {
		t.Errorf("got %+v", resp)
	}
	if n := len(ant.Requests()); n != 3 {
		t.Errorf("anthropic got %d requests, want 3", n)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{500 * time.Millisecond, time.Second}) {
		t.Errorf("waits %v", sleeper.Waits)
	}
	var sent map[string]any
	json.Unmarshal(oai.Requests()[0].Body, &sent)
	if sent["model"] != "gpt-4.1" {
		t.Errorf("openai asked for model %v", sent["model"])
	}
}

func TestNew(t *testing.T) {
	if _, err := anthropic.New(anthropic.Config{BaseURL: "api.anthropic.com"}); err == nil || err.Error() != `anthropic: base url "api.anthropic.com" is not an http(s) url` {
		t.Errorf("got %v", err)
	}
	p, err := anthropic.New(anthropic.Config{})
	if err != nil || p.Name() != "anthropic" {
		t.Fatalf("got %v, %v", p, err)
	}
	if _, err := p.Complete(context.Background(), &llm.Request{}); err == nil || err.Error() != "anthropic: invalid_request: no model given" {
		t.Errorf("empty model: %v", err)
	}
}

func TestStreamAskedJSONAnswered(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []message.Message{wiretest.User("hi")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hi! My name is Claude." {
		t.Errorf("got %+v", resp)
	}
}

// TestToolInputCutShort: a tool's input cut at the token limit is kept
// under RawArgumentsKey, and the stop reason stays max_tokens.
func TestToolInputCutShort(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_cut\",\"name\":\"write_file\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"text\\\": \\\"a long te\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":64}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	srv := wiretest.NewServer(t, wiretest.SSE(stream))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []message.Message{wiretest.User("write")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []message.ToolCall{{ID: "toolu_cut", Name: "write_file", Arguments: map[string]any{anthropic.RawArgumentsKey: `{"text": "a long te`}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopMaxTokens {
		t.Errorf("got %+v", resp)
	}
}

// TestRedactedThinkingRoundTrip: a redacted_thinking block is kept in
// order with the thinking block and sent back unchanged; the thinking
// option sets budget_tokens and lifts max_tokens above it; thinking
// another protocol made is not sent; cache counts are part of the input.
func TestRedactedThinkingRoundTrip(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "redacted_thinking_stream.sse")), wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	req := &llm.Request{Model: "claude-3-7-sonnet-latest", System: "Be careful.", Messages: []message.Message{wiretest.User("hi")}, MaxTokens: 1000,
		Thinking: &llm.Thinking{Effort: "low"}, Stream: true}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []message.Block{
		{Type: message.BlockThinking, Thinking: "Let me think.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Type: message.BlockRedactedThinking, Data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2d8cYRg6JE6sdL+Q0n4Tr0QIcBqL"},
	}
	if !reflect.DeepEqual(first.Thinking, want) || first.Text != "Done." {
		t.Fatalf("got %+v", first)
	}
	if first.Usage != (llm.Usage{InputTokens: 12 + 2048 + 4096, OutputTokens: 57, CacheWriteTokens: 2048, CacheReadTokens: 4096}) {
		t.Errorf("usage %+v", first.Usage)
	}
	blocks := append(append([]message.Block{}, first.Thinking...),
		message.Block{Type: message.BlockThinking, Origin: "gemini", Signature: "c2ln", Data: "[]"},
		message.Block{Type: message.BlockText, Text: first.Text})
	req.Messages = append(req.Messages, message.Message{Role: message.RoleAssistant, Blocks: blocks}, wiretest.User("again"))
	req.Stream, req.NoCache = false, true
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/redacted_request.golden.json", srv.Requests()[1].Body)
	body := string(srv.Requests()[1].Body)
	if strings.Contains(body, "cache_control") || strings.Contains(body, `"c2ln"`) {
		t.Errorf("cache marks or foreign thinking sent: %s", body)
	}
}
