package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/sessions"
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

func user(text string) sessions.Message { return sessions.Message{Role: sessions.RoleUser, Text: text} }

var weatherTool = llm.ToolSpec{
	Name:        "get_weather",
	Description: "Current weather and forecast for a place.",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"location": map[string]any{"type": "string"},
			"days":     map[string]any{"type": "integer"},
		},
		"required": []any{"location"},
	},
}

func TestStreamText(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "text_stream.sse")))
	var deltas []string
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model:    "claude-sonnet-4-5",
		System:   "You are terse.",
		Messages: []sessions.Message{user("Say hello.")},
		Stream:   true,
		OnDelta:  func(d llm.Delta) { deltas = append(deltas, d.Text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hello there! Ça va?",
		Usage:      llm.Usage{InputTokens: 25, OutputTokens: 15},
		StopReason: llm.StopEnd,
		Model:      "claude-sonnet-4-5-20250929",
		Provider:   "anthropic",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if got := strings.Join(deltas, "|"); got != "Hello| there! Ça va?" {
		t.Errorf("deltas %q", got)
	}
	r := srv.Requests()[0]
	if r.Method != "POST" || r.Path != "/v1/messages" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	for k, v := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("authorization header sent: %q", h)
	}
	wiretest.Golden(t, "testdata/text_stream_request.golden.json", r.Body)
}

func TestCompleteText(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hi! My name is Claude.",
		Usage:      llm.Usage{InputTokens: 21 + 1024 + 188086, OutputTokens: 393, CacheReadTokens: 1024, CacheWriteTokens: 188086},
		StopReason: llm.StopEnd,
		Model:      "claude-sonnet-4-5-20250929",
		Provider:   "anthropic",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
}

// TestToolLoop runs two turns: a streamed reply with text and a tool call
// whose input arrives in pieces, then a request carrying the call and its
// result.
func TestToolLoop(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.SSE(file(t, "tool_use_stream.sse")),
		wiretest.JSON(200, file(t, "tool_result_response.json")))
	p := newProvider(t, srv)
	req := &llm.Request{
		Model:      "claude-sonnet-4-5",
		System:     "Use tools when they help.",
		Messages:   []sessions.Message{user("Weather in Paris for two days?")},
		Tools:      []llm.ToolSpec{weatherTool},
		ToolChoice: "auto",
		Stream:     true,
	}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []sessions.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: map[string]any{"location": "Paris, France", "days": int64(2)}}}
	if !reflect.DeepEqual(first.ToolCalls, wantCalls) || first.StopReason != llm.StopToolUse || first.Text != "Okay, let's check the weather for Paris:" {
		t.Fatalf("first reply %+v", first)
	}
	if first.Usage != (llm.Usage{InputTokens: 472, OutputTokens: 89}) {
		t.Errorf("usage %+v", first.Usage)
	}

	req.Messages = append(req.Messages,
		sessions.Message{Role: sessions.RoleAssistant, Text: first.Text, ToolCalls: first.ToolCalls},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: first.ToolCalls[0].ID, Name: "get_weather", Text: `{"today":"sunny, 21 °C","tomorrow":"sunny, 19 °C"}`},
	)
	req.Stream = false
	second, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "It will be sunny in Paris, 21 °C today and 19 °C tomorrow." || second.StopReason != llm.StopEnd {
		t.Errorf("second reply %+v", second)
	}
	wiretest.Golden(t, "testdata/tool_loop_request.golden.json", srv.Requests()[1].Body)
}

// TestParallelToolResults: three calls in one turn; their three results
// (and a user message after them) go back as one user message.
func TestParallelToolResults(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.SSE(file(t, "parallel_tools.sse")),
		wiretest.JSON(200, file(t, "tool_result_response.json")))
	p := newProvider(t, srv)
	req := &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("Weather in Paris and Tokyo, and the time?")}, Tools: []llm.ToolSpec{weatherTool}, Stream: true}
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{
		{ID: "toolu_paris", Name: "get_weather", Arguments: map[string]any{"location": "Paris"}},
		{ID: "toolu_tokyo", Name: "get_weather", Arguments: map[string]any{"location": "Tokyo"}},
		{ID: "toolu_clock", Name: "get_time", Arguments: map[string]any{"zone": "UTC"}},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopToolUse || resp.Usage.OutputTokens != 131 {
		t.Fatalf("got %+v", resp)
	}
	req.Messages = append(req.Messages,
		sessions.Message{Role: sessions.RoleAssistant, ToolCalls: resp.ToolCalls},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: "toolu_paris", Text: "sunny"},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: "toolu_tokyo", Text: "rain"},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: "toolu_clock", Text: "no clock available", IsError: true},
		user("Also, keep it short."),
	)
	req.Stream = false
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/parallel_results_request.golden.json", srv.Requests()[1].Body)
}

func TestToolWithoutArguments(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "no_args_tool.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-haiku-4-5", Messages: []sessions.Message{user("list files")}, Tools: []llm.ToolSpec{{Name: "list_files"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{{ID: "toolu_01NoArgs", Name: "list_files", Arguments: map[string]any{}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopToolUse {
		t.Errorf("got %+v", resp)
	}
}

// TestCompleteToolUse reads thinking, text and tool calls from one JSON body.
func TestCompleteToolUse(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "tool_use_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("go")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:     "Checking both.",
		Thinking: []sessions.Block{{Type: "thinking", Thinking: "Two cities, two calls.", Signature: "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL=="}},
		ToolCalls: []sessions.ToolCall{
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

// TestThinkingRoundTrip: a streamed thinking block keeps its signature,
// and goes back unchanged, before the tool call, on the next request.
func TestThinkingRoundTrip(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.SSE(file(t, "thinking_stream.sse")),
		wiretest.JSON(200, file(t, "tool_result_response.json")))
	p := newProvider(t, srv)
	var deltas []llm.Delta
	req := &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("Weather in Paris?")}, Tools: []llm.ToolSpec{weatherTool}, Stream: true,
		OnDelta: func(d llm.Delta) { deltas = append(deltas, d) }}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	const signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+Ab7NDxx8EP0Fl2wu2uBmVkmjcAsDHqDQz9jrHK4LMqHs8a8nEb6OvsdRi7ZpMBGP=="
	wantThinking := []sessions.Block{{Type: sessions.BlockThinking, Thinking: "The user wants the weather in Paris.\nI should call get_weather.", Signature: signature}}
	if !reflect.DeepEqual(first.Thinking, wantThinking) {
		t.Fatalf("thinking %+v", first.Thinking)
	}
	wantDeltas := []llm.Delta{{Thinking: "The user wants the weather in Paris."}, {Thinking: "\nI should call get_weather."}}
	if !reflect.DeepEqual(deltas, wantDeltas) {
		t.Errorf("deltas %+v", deltas)
	}

	req.Messages = append(req.Messages,
		sessions.Message{Role: sessions.RoleAssistant, Blocks: first.Thinking, ToolCalls: first.ToolCalls},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: first.ToolCalls[0].ID, Text: "sunny"},
	)
	req.Stream, req.OnDelta = false, nil
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[1].Body
	var sent struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if got := sent.Messages[1].Content[0]; got["type"] != "thinking" || got["signature"] != signature || got["thinking"] != wantThinking[0].Thinking {
		t.Errorf("thinking block sent back as %v", got)
	}
	wiretest.Golden(t, "testdata/thinking_request.golden.json", body)
}

func TestUnknownEventsIgnored(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "unknown_events.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("search")}, Stream: true})
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
		Messages: []sessions.Message{
			{Role: sessions.RoleUser, Blocks: []sessions.Block{
				{Type: sessions.BlockText, Text: "What is in this picture?"},
				{Type: sessions.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
			}},
			user("Answer in one word."),
			{Role: sessions.RoleAssistant, Blocks: []sessions.Block{
				{Type: sessions.BlockThinking, Thinking: "from another provider, unsigned"},
				{Type: sessions.BlockText, Text: ""},
				{Type: sessions.BlockText, Text: "Square."},
			}},
			{Role: sessions.RoleSystem, Text: "Answer in French from now on."},
			user("And now?"),
			{Role: sessions.RoleAssistant, Text: ""},
			user("Well?"),
		},
		Tools:       []llm.ToolSpec{weatherTool, {Name: "ping", Description: "Checks the connection."}},
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
		{"", []llm.ToolSpec{weatherTool}, nil},
		{"auto", []llm.ToolSpec{weatherTool}, map[string]any{"type": "auto"}},
		{"none", []llm.ToolSpec{weatherTool}, map[string]any{"type": "none"}},
		{"required", []llm.ToolSpec{weatherTool}, map[string]any{"type": "any"}},
		{"get_weather", []llm.ToolSpec{weatherTool}, map[string]any{"type": "tool", "name": "get_weather"}},
		{"required", nil, nil},
	}
	for _, tt := range tests {
		srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
		if _, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []sessions.Message{user("hi")}, Tools: tt.tools, ToolChoice: tt.choice, MaxTokens: 64}); err != nil {
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
	tests := []struct {
		name       string
		reply      wiretest.Reply
		stream     bool
		cat        llm.Category
		status     int
		retryAfter time.Duration
		noRetry    bool
		msg        string
	}{
		{name: "rate limit", reply: wiretest.JSON(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`).With("Retry-After", "12"), cat: llm.RateLimit, status: 429, retryAfter: 12 * time.Second, msg: "http 429: rate_limit_error: Number of request tokens"},
		{name: "overloaded 529", reply: wiretest.JSON(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`).With("X-Should-Retry", "true"), cat: llm.Overloaded, status: 529, msg: "http 529: overloaded_error: Overloaded"},
		{name: "overloaded as a 429", reply: wiretest.JSON(429, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), cat: llm.Overloaded, status: 429},
		{name: "should not retry", reply: wiretest.JSON(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`).With("X-Should-Retry", "false"), cat: llm.ServerError, status: 500, noRetry: true},
		{name: "retry-after date", reply: wiretest.JSON(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`).With("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT"), cat: llm.RateLimit, status: 429},
		{name: "prompt too long", reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`), cat: llm.ContextLength, status: 400},
		{name: "input and max_tokens exceed the window", reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and `+"`max_tokens`"+` exceed context limit: 187254 + 20000 > 200000, decrease input length or `+"`max_tokens`"+` and try again"}}`), cat: llm.ContextLength, status: 400},
		{name: "credit balance", reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`), cat: llm.Auth, status: 400},
		{name: "billing error", reply: wiretest.JSON(402, `{"type":"error","error":{"type":"billing_error","message":"Payment required"}}`).With("X-Should-Retry", "true"), cat: llm.Auth, status: 402},
		{name: "bad key", reply: wiretest.JSON(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`), cat: llm.Auth, status: 401},
		{name: "permission", reply: wiretest.JSON(403, `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`), cat: llm.Auth, status: 403},
		{name: "bad request", reply: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`), cat: llm.InvalidRequest, status: 400},
		{name: "unknown model", reply: wiretest.JSON(404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`), cat: llm.InvalidRequest, status: 404},
		{name: "too large", reply: wiretest.JSON(413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`), cat: llm.InvalidRequest, status: 413},
		{name: "timeout error", reply: wiretest.JSON(504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`), cat: llm.Timeout, status: 504},
		{name: "html 529", reply: wiretest.Reply{Status: 529, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>Site overloaded</body></html>"}, cat: llm.Overloaded, status: 529, msg: "http 529: <html><body>Site overloaded</body></html>"},
		{name: "plain text 502", reply: wiretest.Reply{Status: 502, Body: "  upstream connect error or disconnect/reset before headers\n"}, cat: llm.ServerError, status: 502, msg: "http 502: upstream connect error or disconnect/reset before headers"},
		{name: "empty 503", reply: wiretest.Reply{Status: 503}, cat: llm.Overloaded, status: 503, msg: "http 503: Service Unavailable"},
		{name: "mid-stream error event", reply: wiretest.SSE(file(t, "midstream_error.sse")), stream: true, cat: llm.Overloaded, msg: "error event: overloaded_error: Overloaded"},
		{name: "mid-stream api error", reply: wiretest.SSE("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n"), stream: true, cat: llm.ServerError},
		{name: "truncated stream", reply: wiretest.SSE(file(t, "truncated.sse")), stream: true, cat: llm.Network, msg: "stream ended before message_stop"},
		{name: "malformed event", reply: wiretest.SSE("event: message_start\ndata: {\"type\":\n\n"), stream: true, cat: llm.ServerError, msg: "malformed stream event"},
		{name: "error body with 200", reply: wiretest.JSON(200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), cat: llm.Overloaded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			e, ok := llm.AsError(err)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Provider != "anthropic" || e.Category != tt.cat || e.Status != tt.status || e.RetryAfter != tt.retryAfter || e.NoRetry != tt.noRetry {
				t.Errorf("got %+v", e)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msg)
			}
			if tt.cat == llm.Auth && e.Retryable() {
				t.Errorf("auth error is retryable")
			}
		})
	}
}

func TestRetryAfterThenSuccess(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.JSON(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`).With("Retry-After", "7"),
		wiretest.SSE(file(t, "text_stream.sse")))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	req := &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: true}
	resp, err := policy.Call(context.Background(), func() (*llm.Response, error) { return p.Complete(context.Background(), req) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello there! Ça va?" {
		t.Errorf("text %q", resp.Text)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{7 * time.Second}) {
		t.Errorf("waits %v, want [7s]", sleeper.Waits)
	}
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
	resp, err := llm.Fallback(context.Background(), chain, policy, &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}})
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

func TestCancelDuringStream(t *testing.T) {
	parts := strings.SplitAfter(file(t, "text_stream.sse"), "\n\n")
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: strings.Join(parts[:4], ""), Hold: true})
	p := newProvider(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		resp *llm.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := p.Complete(ctx, &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: true,
			OnDelta: func(llm.Delta) { cancel() }})
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if r.resp != nil || !errors.Is(r.err, context.Canceled) {
			t.Errorf("got %+v, %v; want context.Canceled", r.resp, r.err)
		}
		if _, ok := llm.AsError(r.err); ok {
			t.Errorf("cancellation reported as *llm.Error: %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after cancellation")
	}
}

func TestRequestTimeout(t *testing.T) {
	parts := strings.SplitAfter(file(t, "text_stream.sse"), "\n\n")
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: parts[0], Hold: true})
	p := newProvider(t, srv, func(c *anthropic.Config) { c.Timeout = 100 * time.Millisecond })
	_, err := p.Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: true})
	e, ok := llm.AsError(err)
	if !ok || e.Category != llm.Timeout || !e.Retryable() {
		t.Fatalf("got %v, want a timeout *llm.Error", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := wiretest.NewServer(t)
	srv.Close()
	_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}})
	if e, ok := llm.AsError(err); !ok || e.Category != llm.Network {
		t.Fatalf("got %v, want a network *llm.Error", err)
	}
}

// TestKeyNeverInErrors drives every error path with a server that puts the
// key (from the request's headers) in what it sends back.
func TestKeyNeverInErrors(t *testing.T) {
	tests := []struct {
		name   string
		reply  wiretest.Reply
		stream bool
		base   string // overrides the server's URL
	}{
		{name: "json error echoing the key", reply: wiretest.JSON(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: `+testKey+`"}}`)},
		{name: "non-json body echoing headers", reply: wiretest.Reply{Status: 502, Body: "proxy got headers:\n", EchoHeaders: true}},
		{name: "overloaded echoing headers", reply: wiretest.Reply{Status: 529, Body: "overloaded; ", EchoHeaders: true}},
		{name: "error event echoing the key", reply: wiretest.SSE("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"key " + testKey + "\"}}\n\n"), stream: true},
		{name: "key in the base url", base: "http://127.0.0.1:1/?key=" + testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t)
			if tt.base == "" {
				srv = wiretest.NewServer(t, tt.reply)
			}
			p := newProvider(t, srv, func(c *anthropic.Config) {
				if tt.base != "" {
					c.BaseURL = tt.base
				}
			})
			_, err := p.Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			wiretest.CheckScrubbed(t, err, testKey)
		})
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

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": testKey, "ANTHROPIC_BASE_URL": "https://proxy.example"}
	got := anthropic.ConfigFromEnv(func(k string) string { return env[k] })
	if want := (anthropic.Config{BaseURL: "https://proxy.example", APIKey: testKey}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestStreamAskedJSONAnswered(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{user("hi")}, Stream: true})
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
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []sessions.Message{user("write")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{{ID: "toolu_cut", Name: "write_file", Arguments: map[string]any{anthropic.RawArgumentsKey: `{"text": "a long te`}}}
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
	req := &llm.Request{Model: "claude-3-7-sonnet-latest", System: "Be careful.", Messages: []sessions.Message{user("hi")}, MaxTokens: 1000,
		Thinking: &llm.Thinking{Effort: "low"}, Stream: true}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.Block{
		{Type: sessions.BlockThinking, Thinking: "Let me think.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Type: sessions.BlockRedactedThinking, Data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2d8cYRg6JE6sdL+Q0n4Tr0QIcBqL"},
	}
	if !reflect.DeepEqual(first.Thinking, want) || first.Text != "Done." {
		t.Fatalf("got %+v", first)
	}
	if first.Usage != (llm.Usage{InputTokens: 12 + 2048 + 4096, OutputTokens: 57, CacheWriteTokens: 2048, CacheReadTokens: 4096}) {
		t.Errorf("usage %+v", first.Usage)
	}
	blocks := append(append([]sessions.Block{}, first.Thinking...),
		sessions.Block{Type: sessions.BlockThinking, Origin: "gemini", Signature: "c2ln", Data: "[]"},
		sessions.Block{Type: sessions.BlockText, Text: first.Text})
	req.Messages = append(req.Messages, sessions.Message{Role: sessions.RoleAssistant, Blocks: blocks}, user("again"))
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
