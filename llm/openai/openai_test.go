package openai_test

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
const testKey = "sk-test-not-a-real-key"

func newProvider(t *testing.T, srv *wiretest.Server, edit ...func(*openai.Config)) *openai.Provider {
	t.Helper()
	cfg := openai.Config{BaseURL: srv.URL + "/v1", APIKey: testKey}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := openai.New(cfg)
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
	p := newProvider(t, srv)
	var deltas []string
	resp, err := p.Complete(context.Background(), &llm.Request{
		Model:    "gpt-4.1",
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
		Usage:      llm.Usage{InputTokens: 19, OutputTokens: 6},
		StopReason: llm.StopEnd,
		Model:      "gpt-4.1-2025-04-14",
		Provider:   "openai",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if got := strings.Join(deltas, "|"); got != "Hello| there|! Ça va?" {
		t.Errorf("deltas %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	wiretest.Golden(t, "testdata/text_stream_request.golden.json", r.Body)
}

func TestCompleteText(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	resp, err := p.Complete(context.Background(), &llm.Request{Model: "o4-mini", Messages: []sessions.Message{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hello! How can I help you today?",
		Usage:      llm.Usage{InputTokens: 2006, OutputTokens: 274, CacheReadTokens: 1920, ReasoningTokens: 256},
		StopReason: llm.StopEnd,
		Model:      "o4-mini-2025-04-16",
		Provider:   "openai",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if got := srv.Requests()[0].Header.Get("Accept"); got != "application/json" {
		t.Errorf("accept %q", got)
	}
}

// TestToolLoop runs two turns: a streamed reply calling a tool with its
// arguments in fragments, then a request carrying the call and its result.
func TestToolLoop(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.SSE(file(t, "tool_call_stream.sse")),
		wiretest.JSON(200, file(t, "tool_result_response.json")))
	p := newProvider(t, srv)
	req := &llm.Request{
		Model:      "gpt-4.1",
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
	wantCalls := []sessions.ToolCall{{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather", Arguments: map[string]any{"location": "Paris, France", "days": int64(2)}}}
	if !reflect.DeepEqual(first.ToolCalls, wantCalls) || first.StopReason != llm.StopToolUse || first.Text != "" {
		t.Fatalf("first reply %+v", first)
	}
	if first.Usage != (llm.Usage{InputTokens: 81, OutputTokens: 20}) {
		t.Errorf("usage %+v", first.Usage)
	}

	req.Messages = append(req.Messages,
		sessions.Message{Role: sessions.RoleAssistant, ToolCalls: first.ToolCalls},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: first.ToolCalls[0].ID, Name: "get_weather", Text: `{"today":"sunny, 21 °C","tomorrow":"sunny, 19 °C"}`},
	)
	req.Stream = false
	second, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "It will be sunny in Paris, 21 °C today and 19 °C tomorrow." || second.StopReason != llm.StopEnd || len(second.ToolCalls) != 0 {
		t.Errorf("second reply %+v", second)
	}
	wiretest.Golden(t, "testdata/tool_loop_request.golden.json", srv.Requests()[1].Body)
}

func TestParallelToolCalls(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "parallel_tools.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("Weather in Paris and Tokyo, and the time?")}, Tools: []llm.ToolSpec{weatherTool}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{
		{ID: "call_paris", Name: "get_weather", Arguments: map[string]any{"location": "Paris"}},
		{ID: "call_tokyo", Name: "get_weather", Arguments: map[string]any{"location": "Tokyo"}},
		{ID: "call_clock", Name: "get_time", Arguments: map[string]any{"zone": "UTC"}},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("calls %+v", resp.ToolCalls)
	}
	if resp.StopReason != llm.StopToolUse || resp.Usage.OutputTokens != 55 {
		t.Errorf("stop %q usage %+v", resp.StopReason, resp.Usage)
	}
}

// TestToolWithoutArguments: empty arguments are the empty object, and a
// tool call is a tool_use stop even when finish_reason says stop (as
// Ollama sends it).
func TestToolWithoutArguments(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "no_args_tool.sse")))
	p := newProvider(t, srv, func(c *openai.Config) { c.Name = "ollama"; c.APIKey = "" })
	resp, err := p.Complete(context.Background(), &llm.Request{Model: "llama3.2", Messages: []sessions.Message{user("list files")}, Tools: []llm.ToolSpec{{Name: "list_files"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{{ID: "call_9zq3", Name: "list_files", Arguments: map[string]any{}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopToolUse || resp.Provider != "ollama" {
		t.Errorf("got %+v", resp)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("authorization sent without a key: %q", h)
	}
}

// TestInvalidToolArguments: arguments cut short at the token limit are
// kept under RawArgumentsKey; the model call itself succeeds.
func TestInvalidToolArguments(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "invalid_args.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("write")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.ToolCall{{ID: "call_cut", Name: "write_file", Arguments: map[string]any{openai.RawArgumentsKey: `{"path": "notes.txt", "text": "a long te`}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopMaxTokens {
		t.Errorf("got %+v", resp)
	}
}

func TestReasoningContent(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "reasoning_stream.sse")))
	var deltas []llm.Delta
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "deepseek-reasoner", Messages: []sessions.Message{user("hello")}, Stream: true, OnDelta: func(d llm.Delta) { deltas = append(deltas, d) }})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hi!" || resp.Usage.ReasoningTokens != 7 {
		t.Errorf("got %+v", resp)
	}
	wantThinking := []sessions.Block{{Type: sessions.BlockThinking, Thinking: "The user greets me. Reply briefly."}}
	if !reflect.DeepEqual(resp.Thinking, wantThinking) {
		t.Errorf("thinking %+v", resp.Thinking)
	}
	wantDeltas := []llm.Delta{{Thinking: "The user greets me."}, {Thinking: " Reply briefly."}, {Text: "Hi!"}}
	if !reflect.DeepEqual(deltas, wantDeltas) {
		t.Errorf("deltas %+v", deltas)
	}
}

// TestRequestMapping covers content blocks, the request options and a
// thinking block sent back (dropped: Chat Completions takes none).
func TestRequestMapping(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	temp := 0.25
	_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model: "gpt-4.1",
		Messages: []sessions.Message{
			{Role: sessions.RoleUser, Blocks: []sessions.Block{
				{Type: sessions.BlockText, Text: "What is in this picture?"},
				{Type: sessions.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
			}},
			{Role: sessions.RoleAssistant, Blocks: []sessions.Block{
				{Type: sessions.BlockThinking, Thinking: "A small image.", Signature: "sig"},
				{Type: sessions.BlockText, Text: "A red square."},
			}},
			{Role: sessions.RoleSystem, Text: "Answer in French from now on."},
			user("And now?"),
		},
		Tools:       []llm.ToolSpec{weatherTool, {Name: "ping", Description: "Checks the connection."}},
		ToolChoice:  "get_weather",
		Temperature: &temp,
		MaxTokens:   300,
		Stop:        []string{"END"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/request_mapping.golden.json", srv.Requests()[0].Body)
}

func TestMaxTokensField(t *testing.T) {
	for _, tt := range []struct{ name, field, other string }{
		{"openai", "max_completion_tokens", "max_tokens"},
		{"ollama", "max_tokens", "max_completion_tokens"},
		{"vllm", "max_tokens", "max_completion_tokens"},
	} {
		srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
		p := newProvider(t, srv, func(c *openai.Config) { c.Name = tt.name })
		if _, err := p.Complete(context.Background(), &llm.Request{Model: "m", Messages: []sessions.Message{user("hi")}, MaxTokens: 50, ToolChoice: "required"}); err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.Unmarshal(srv.Requests()[0].Body, &body)
		if body[tt.field] != 50.0 || body[tt.other] != nil {
			t.Errorf("%s: body %v", tt.name, body)
		}
		if _, ok := body["tool_choice"]; ok {
			t.Errorf("%s: tool_choice sent without tools", tt.name)
		}
	}
}

func TestErrors(t *testing.T) {
	rateLimit := `{"error":{"message":"Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
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
		{name: "rate limit", reply: wiretest.JSON(429, rateLimit).With("Retry-After", "2"), cat: llm.RateLimit, status: 429, retryAfter: 2 * time.Second, msg: "http 429: rate_limit_exceeded: Rate limit reached"},
		{name: "retry-after-ms", reply: wiretest.JSON(429, rateLimit).With("Retry-After-Ms", "1500"), cat: llm.RateLimit, status: 429, retryAfter: 1500 * time.Millisecond},
		{name: "quota is terminal", reply: wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`).With("X-Should-Retry", "true"), cat: llm.Auth, status: 429, msg: "insufficient_quota: You exceeded your current quota"},
		{name: "context length", reply: wiretest.JSON(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`), cat: llm.ContextLength, status: 400},
		{name: "vllm context length", reply: wiretest.JSON(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`), cat: llm.ContextLength, status: 400},
		{name: "bad key", reply: wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: sk-test-****-key.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`), cat: llm.Auth, status: 401},
		{name: "forbidden", reply: wiretest.JSON(403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`), cat: llm.Auth, status: 403},
		{name: "bad request", reply: wiretest.JSON(400, `{"error":{"message":"Invalid value for 'tool_choice'.","type":"invalid_request_error","param":"tool_choice","code":null}}`), cat: llm.InvalidRequest, status: 400, msg: "http 400: invalid_request_error: Invalid value for 'tool_choice'."},
		{name: "unknown model", reply: wiretest.JSON(404, `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`), cat: llm.InvalidRequest, status: 404},
		{name: "server error", reply: wiretest.JSON(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`), cat: llm.ServerError, status: 500},
		{name: "overloaded", reply: wiretest.JSON(503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`), cat: llm.Overloaded, status: 503},
		{name: "should not retry", reply: wiretest.JSON(503, `{"error":{"message":"busy","type":"server_error"}}`).With("X-Should-Retry", "false"), cat: llm.Overloaded, status: 503, noRetry: true},
		{name: "should retry", reply: wiretest.JSON(409, `{"error":{"message":"lock timeout","type":"invalid_request_error"}}`).With("X-Should-Retry", "true"), cat: llm.ServerError, status: 409},
		{name: "request timeout", reply: wiretest.JSON(408, `{"error":{"message":"Request timed out.","type":"timeout"}}`), cat: llm.Timeout, status: 408},
		{name: "html body", reply: wiretest.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"}, cat: llm.ServerError, status: 502, msg: "http 502: <html> <head><title>502 Bad Gateway</title></head>"},
		{name: "plain text body", reply: wiretest.Reply{Status: 400, Body: "model is required\n"}, cat: llm.InvalidRequest, status: 400, msg: "http 400: model is required"},
		{name: "empty body", reply: wiretest.Reply{Status: 504}, cat: llm.Timeout, status: 504, msg: "http 504: Gateway Timeout"},
		{name: "error in a 200 body", reply: wiretest.JSON(200, `{"error":{"message":"upstream failed","type":"server_error"}}`), cat: llm.ServerError, msg: "error in the reply: server_error: upstream failed"},
		{name: "mid-stream error", reply: wiretest.SSE(file(t, "midstream_error.sse")), stream: true, cat: llm.ServerError, msg: "The server had an error while processing your request"},
		{name: "mid-stream rate limit", reply: wiretest.SSE(`data: {"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}` + "\n\n"), stream: true, cat: llm.RateLimit},
		{name: "mid-stream error with a status code", reply: wiretest.SSE(`data: {"error":{"object":"error","message":"busy","type":"ServiceUnavailableError","code":503}}` + "\n\n"), stream: true, cat: llm.Overloaded},
		{name: "truncated stream", reply: wiretest.SSE(file(t, "truncated.sse")), stream: true, cat: llm.Network, msg: "stream ended before [DONE]"},
		{name: "malformed chunk", reply: wiretest.SSE("data: {\"choices\": [\n\n"), stream: true, cat: llm.ServerError, msg: "malformed stream chunk"},
		{name: "no choices", reply: wiretest.JSON(200, `{"id":"x","choices":[]}`), cat: llm.ServerError, msg: "the reply has no choices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			e, ok := llm.AsError(err)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Provider != "openai" || e.Category != tt.cat || e.Status != tt.status || e.RetryAfter != tt.retryAfter || e.NoRetry != tt.noRetry {
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
		wiretest.JSON(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`).With("Retry-After", "3"),
		wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	req := &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}}
	resp, err := policy.Call(context.Background(), func() (*llm.Response, error) { return p.Complete(context.Background(), req) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello! How can I help you today?" {
		t.Errorf("text %q", resp.Text)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{3 * time.Second}) {
		t.Errorf("waits %v, want [3s]", sleeper.Waits)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestQuotaIsNotRetried(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 3, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	_, err := policy.Call(context.Background(), func() (*llm.Response, error) {
		return p.Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}})
	})
	if e, ok := llm.AsError(err); !ok || e.Category != llm.Auth {
		t.Fatalf("got %v", err)
	}
	if len(srv.Requests()) != 1 || len(sleeper.Waits) != 0 {
		t.Errorf("retried: %d requests, waits %v", len(srv.Requests()), sleeper.Waits)
	}
}

// TestOverloadedThenFallback: OpenAI stays overloaded through every retry;
// the fallback chain then asks Anthropic, which answers.
func TestOverloadedThenFallback(t *testing.T) {
	overloaded := wiretest.JSON(503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`)
	oai := wiretest.NewServer(t, overloaded, overloaded)
	ant := wiretest.NewServer(t, wiretest.JSON(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hello from Anthropic."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":5}}`))
	second, err := anthropic.New(anthropic.Config{BaseURL: ant.URL, APIKey: "sk-ant-test-not-a-real-key"})
	if err != nil {
		t.Fatal(err)
	}
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 1, Backoff: 200 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	chain := []llm.Target{{Provider: newProvider(t, oai)}, {Provider: second, Model: "claude-sonnet-4-5"}}
	resp, err := llm.Fallback(context.Background(), chain, policy, &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "anthropic" || resp.Text != "Hello from Anthropic." || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("got %+v", resp)
	}
	if n := len(oai.Requests()); n != 2 {
		t.Errorf("openai got %d requests, want 2", n)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{200 * time.Millisecond}) {
		t.Errorf("waits %v", sleeper.Waits)
	}
}

func TestCancelDuringStream(t *testing.T) {
	first := strings.SplitAfter(file(t, "text_stream.sse"), "\n\n")[1]
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: first, Hold: true})
	p := newProvider(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		resp *llm.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := p.Complete(ctx, &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: true,
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
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: ": stalled\n\n", Hold: true})
	p := newProvider(t, srv, func(c *openai.Config) { c.Timeout = 100 * time.Millisecond })
	_, err := p.Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: true})
	e, ok := llm.AsError(err)
	if !ok || e.Category != llm.Timeout || !e.Retryable() {
		t.Fatalf("got %v, want a timeout *llm.Error", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := wiretest.NewServer(t)
	srv.Close()
	_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}})
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
		{name: "json error echoing the key", reply: wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`","type":"invalid_request_error","code":"invalid_api_key"}}`)},
		{name: "non-json body echoing headers", reply: wiretest.Reply{Status: 500, Body: "upstream rejected request headers:\n", EchoHeaders: true}},
		{name: "rate limit echoing headers", reply: wiretest.Reply{Status: 429, Body: "too many: ", EchoHeaders: true}},
		{name: "mid-stream error echoing the key", reply: wiretest.SSE(`data: {"error":{"message":"bad token Bearer ` + testKey + `","type":"server_error"}}` + "\n\n"), stream: true},
		{name: "error in a 200 body", reply: wiretest.JSON(200, `{"error":"key `+testKey+` revoked"}`)},
		{name: "key in the base url", base: "http://127.0.0.1:1/v1?key=" + testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t)
			if tt.base == "" {
				srv = wiretest.NewServer(t, tt.reply)
			}
			p := newProvider(t, srv, func(c *openai.Config) {
				if tt.base != "" {
					c.BaseURL = tt.base
				}
			})
			_, err := p.Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			wiretest.CheckScrubbed(t, err, testKey)
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		cfg  openai.Config
		name string
		err  string
	}{
		{cfg: openai.Config{}, name: "openai"},
		{cfg: openai.Config{Name: "ollama"}, name: "ollama"},
		{cfg: openai.Config{Name: "openai_compatible"}, err: "openai_compatible: a base url is required for an openai-compatible provider"},
		{cfg: openai.Config{Name: "vllm", BaseURL: "localhost:8000"}, err: `vllm: base url "localhost:8000" is not an http(s) url`},
		{cfg: openai.Config{Name: "vllm", BaseURL: "http://gpu-box:8000/v1/"}, name: "vllm"},
	}
	for _, tt := range tests {
		p, err := openai.New(tt.cfg)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("New(%+v): got %v, want %q", tt.cfg, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name() != tt.name {
			t.Errorf("New(%+v): got %v, %v", tt.cfg, p, err)
		}
	}
	p, _ := openai.New(openai.Config{})
	if _, err := p.Complete(context.Background(), &llm.Request{}); err == nil || err.Error() != "openai: invalid_request: no model given" {
		t.Errorf("empty model: %v", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"OPENAI_API_KEY":        testKey,
		"OPENAI_BASE_URL":       "https://proxy.example/v1",
		"SKEIN_OLLAMA_BASE_URL": "http://gpu-box:11434/v1",
	}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name string
		want openai.Config
	}{
		{"openai", openai.Config{Name: "openai", BaseURL: "https://proxy.example/v1", APIKey: testKey}},
		{"ollama", openai.Config{Name: "ollama", BaseURL: "http://gpu-box:11434/v1"}},
		{"openai_compatible", openai.Config{Name: "openai_compatible"}},
	}
	for _, tt := range tests {
		if got := openai.ConfigFromEnv(tt.name, getenv); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ConfigFromEnv(%q) = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := openai.ConfigFromEnv("openai", func(string) string { return "" }); got.BaseURL != "" || got.APIKey != "" {
		t.Errorf("empty environment: %+v", got)
	}
}

// TestReplyShapes covers reply forms that servers other than OpenAI send,
// and the documented choices for odd replies.
func TestReplyShapes(t *testing.T) {
	tests := []struct {
		name   string
		reply  wiretest.Reply
		stream bool
		want   *llm.Response
	}{
		{
			name:  "content as parts",
			reply: wiretest.JSON(200, `{"model":"m","choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"one "},{"type":"text","text":"two"}]},"finish_reason":"stop"}]}`),
			want:  &llm.Response{Text: "one two", StopReason: llm.StopEnd, Model: "m", Provider: "openai"},
		},
		{
			name:  "arguments as an object, no call id",
			reply: wiretest.JSON(200, `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":{"location":"Oslo"}}}]},"finish_reason":"stop"}]}`),
			want:  &llm.Response{ToolCalls: []sessions.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: map[string]any{"location": "Oslo"}}}, StopReason: llm.StopToolUse, Model: "m", Provider: "openai"},
		},
		{
			name:  "refusal",
			reply: wiretest.JSON(200, `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`),
			want:  &llm.Response{Text: "I can't help with that.", StopReason: llm.StopEnd, Model: "m", Provider: "openai"},
		},
		{
			name:  "content filter",
			reply: wiretest.JSON(200, `{"model":"m","choices":[{"message":{"role":"assistant","content":""},"finish_reason":"content_filter"}]}`),
			want:  &llm.Response{StopReason: "content_filter", Model: "m", Provider: "openai"},
		},
		{
			name:   "stream asked, json answered",
			reply:  wiretest.JSON(200, `{"model":"m","choices":[{"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`),
			stream: true,
			want:   &llm.Response{Text: "whole", StopReason: llm.StopEnd, Model: "m", Provider: "openai", Usage: llm.Usage{InputTokens: 1, OutputTokens: 1}},
		},
		{
			name:  "json asked, stream answered",
			reply: wiretest.SSE("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"streamed\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"),
			want:  &llm.Response{Text: "streamed", StopReason: llm.StopEnd, Model: "m", Provider: "openai"},
		},
		{
			name:   "calls sent whole at index 0",
			reply:  wiretest.SSE("data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\ndata: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"),
			stream: true,
			want:   &llm.Response{ToolCalls: []sessions.ToolCall{{ID: "a", Name: "f", Arguments: map[string]any{}}, {ID: "b", Name: "g", Arguments: map[string]any{"x": int64(1)}}}, StopReason: llm.StopToolUse, Model: "m", Provider: "openai"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp, tt.want) {
				t.Errorf("got %+v\nwant %+v", resp, tt.want)
			}
		})
	}
}

// TestCancelAfterWholeReplyArrived: a call cancelled while its reply is
// read returns the cancellation, even when the rest of the reply had
// already arrived.
func TestCancelAfterWholeReplyArrived(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "text_stream.sse")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := newProvider(t, srv).Complete(ctx, &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: true,
		OnDelta: func(llm.Delta) { cancel() }})
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("got %+v, %v; want context.Canceled", resp, err)
	}
}

// TestAzure: the deployment (the model) and api-version are in the URL,
// the key in the api-key header only.
func TestAzure(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")), wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv, func(c *openai.Config) { c.Name = "azure"; c.BaseURL = srv.URL + "/" })
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "my gpt-4o", Messages: []sessions.Message{user("hi")}, MaxTokens: 20}); err != nil {
		t.Fatal(err)
	}
	p = newProvider(t, srv, func(c *openai.Config) { c.Name = "azure"; c.APIVersion = "2025-04-01-preview" })
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "o4-mini", Messages: []sessions.Message{user("hi")}, Thinking: &llm.Thinking{BudgetTokens: 20000}}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	for i, want := range []string{"/openai/deployments/my%20gpt-4o/chat/completions?api-version=2024-10-21", "/v1/openai/deployments/o4-mini/chat/completions?api-version=2025-04-01-preview"} {
		r := reqs[i]
		if got := r.URL; got != want {
			t.Errorf("request %d: url %q, want %q", i, got, want)
		}
		if r.Header.Get("api-key") != testKey || r.Header.Get("Authorization") != "" {
			t.Errorf("request %d: headers %v", i, r.Header)
		}
	}
	var body map[string]any
	json.Unmarshal(reqs[0].Body, &body)
	if body["max_completion_tokens"] != 20.0 {
		t.Errorf("body %v", body)
	}
	json.Unmarshal(reqs[1].Body, &body)
	if body["reasoning_effort"] != "high" {
		t.Errorf("body %v", body)
	}
	if _, err := openai.New(openai.Config{Name: "azure"}); err == nil || !strings.Contains(err.Error(), "the resource endpoint") {
		t.Errorf("no endpoint: %v", err)
	}
}
