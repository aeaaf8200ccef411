package openairesponses_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openairesponses"
	"github.com/skein-dev/skein/sessions"
)

// testKey is an obviously fake key; tests check it never leaks.
const testKey = "sk-test-not-a-real-key"

func newProvider(t *testing.T, srv *wiretest.Server, edit ...func(*openairesponses.Config)) *openairesponses.Provider {
	t.Helper()
	cfg := openairesponses.Config{BaseURL: srv.URL + "/v1", APIKey: testKey}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := openairesponses.New(cfg)
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
		"type":       "object",
		"properties": map[string]any{"location": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
		"required":   []any{"location"},
	},
}

func TestStreamText(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "text_stream.sse")))
	var deltas []string
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model:     "gpt-4.1",
		System:    "You are terse.",
		Messages:  []sessions.Message{user("Say hello.")},
		MaxTokens: 100,
		Stop:      []string{"END"},
		Stream:    true,
		OnDelta:   func(d llm.Delta) { deltas = append(deltas, d.Text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hello there! Ça va?",
		Usage:      llm.Usage{InputTokens: 19, OutputTokens: 6},
		StopReason: llm.StopEnd,
		Model:      "gpt-4.1-2025-04-14",
		Provider:   "openai_responses",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if got := strings.Join(deltas, "|"); got != "Hello| there|! Ça va?" {
		t.Errorf("deltas %q", got)
	}
	r := srv.Requests()[0]
	if r.Method != "POST" || r.Path != "/v1/responses" {
		t.Errorf("request %s %s", r.Method, r.Path)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	wiretest.Golden(t, "testdata/text_stream_request.golden.json", r.Body)
}

// TestCompleteWithReasoning: a non-streamed reply of a reasoning model
// keeps its output items (compacted) in a thinking block.
func TestCompleteWithReasoning(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "o4-mini", Messages: []sessions.Message{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text: "It will be sunny in Paris, 21 °C.",
		Thinking: []sessions.Block{{Type: sessions.BlockThinking, Origin: "openai_responses",
			Data: `[{"id":"rs_a1","type":"reasoning","summary":[],"encrypted_content":"gAAAAABoQm9yZQ=="},{"id":"msg_a2","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"It will be sunny in Paris, 21 °C."}],"role":"assistant"}]`}},
		Usage:      llm.Usage{InputTokens: 2006, OutputTokens: 274, CacheReadTokens: 1920, ReasoningTokens: 256},
		StopReason: llm.StopEnd,
		Model:      "o4-mini-2025-04-16",
		Provider:   "openai_responses",
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
		wiretest.SSE(file(t, "text_stream.sse")))
	p := newProvider(t, srv)
	req := &llm.Request{
		Model:      "gpt-4.1",
		System:     "Use tools when they help.",
		Messages:   []sessions.Message{user("Weather in Paris for two days?")},
		Tools:      []llm.ToolSpec{weatherTool, {Name: "ping"}},
		ToolChoice: "auto",
		Stream:     true,
	}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []sessions.ToolCall{{ID: "call_12345xyz", Name: "get_weather", Arguments: map[string]any{"location": "Paris, France", "days": int64(2)}}}
	if !reflect.DeepEqual(first.ToolCalls, wantCalls) || first.StopReason != llm.StopToolUse || first.Text != "" || first.Thinking != nil {
		t.Fatalf("first reply %+v", first)
	}
	req.Messages = append(req.Messages,
		sessions.Message{Role: sessions.RoleAssistant, Text: "Checking.", ToolCalls: first.ToolCalls},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: first.ToolCalls[0].ID, Name: "get_weather", Text: `{"today":"sunny, 21 °C"}`},
		sessions.Message{Role: sessions.RoleUser, Blocks: []sessions.Block{{Type: sessions.BlockText, Text: "And this?"}, {Type: sessions.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
	)
	req.ToolChoice = "get_weather"
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/tool_loop_request.golden.json", srv.Requests()[1].Body)
}

// TestParallelToolCalls: three calls whose arguments arrive interleaved,
// from a server that sends no output_item.done events.
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
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopToolUse || resp.Usage.OutputTokens != 55 {
		t.Errorf("got %+v", resp)
	}
}

// TestReasoningRoundTrip: the reasoning item (encrypted content, summary)
// and the function call it pairs with go back in the next request byte
// for byte, through a session store and its JSON form.
func TestReasoningRoundTrip(t *testing.T) {
	stream := file(t, "reasoning_stream.sse")
	srv := wiretest.NewServer(t, wiretest.SSE(stream), wiretest.SSE(file(t, "text_stream.sse")))
	p := newProvider(t, srv)
	var thinking strings.Builder
	req := &llm.Request{Model: "o4-mini", Messages: []sessions.Message{user("Weather in Paris?")}, Tools: []llm.ToolSpec{weatherTool},
		Thinking: &llm.Thinking{Effort: "high"}, Stream: true, OnDelta: func(d llm.Delta) { thinking.WriteString(d.Thinking) }}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	summary := "**Checking the weather**\n\nThe user wants Paris weather; I will call get_weather."
	if thinking.String() != summary || len(first.Thinking) != 1 || first.Thinking[0].Thinking != summary {
		t.Fatalf("thinking %q, blocks %+v", thinking.String(), first.Thinking)
	}
	if first.Usage != (llm.Usage{InputTokens: 120, OutputTokens: 210, CacheReadTokens: 64, ReasoningTokens: 192}) {
		t.Errorf("usage %+v", first.Usage)
	}
	// The items exactly as the server sent them in output_item.done.
	var items []string
	for _, ev := range strings.Split(stream, "\n\n") {
		if strings.Contains(ev, "response.output_item.done") {
			data := ev[strings.Index(ev, "data: ")+6:]
			items = append(items, data[strings.Index(data, `"item":`)+7:len(data)-1])
		}
	}
	if len(items) != 2 || !strings.Contains(items[0], `"encrypted_content":"gAAAAABoIPOGkLs4tU0gkE9xZ5kiE5xJ7sZp3N+nXqY/Q2o=<&>"`) {
		t.Fatalf("items %q", items)
	}
	msg := sessions.Message{Role: sessions.RoleAssistant, Blocks: append(first.Thinking, sessions.Block{Type: sessions.BlockText}), ToolCalls: first.ToolCalls}
	data, err := msg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored sessions.Message
	if err := stored.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages, stored, sessions.Message{Role: sessions.RoleTool, ToolCallID: "call_ZzBh1", Text: "sunny"})
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := string(srv.Requests()[1].Body)
	if want := `{"role":"user","content":"Weather in Paris?"},` + items[0] + "," + items[1] + `,{"type":"function_call_output"`; !strings.Contains(body, want) {
		t.Errorf("items not sent back unchanged:\n%s\nwant it to contain\n%s", body, want)
	}
	wiretest.Golden(t, "testdata/reasoning_request.golden.json", srv.Requests()[1].Body)
}

func TestIncomplete(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "incomplete_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "The first part of a long" || resp.StopReason != llm.StopMaxTokens {
		t.Errorf("got %+v", resp)
	}
}

func TestErrors(t *testing.T) {
	rateLimit := `{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	tests := []struct {
		name       string
		reply      wiretest.Reply
		stream     bool
		cat        llm.Category
		status     int
		retryAfter time.Duration
		msg        string
	}{
		{name: "rate limit", reply: wiretest.JSON(429, rateLimit).With("Retry-After", "2"), cat: llm.RateLimit, status: 429, retryAfter: 2 * time.Second, msg: "http 429: rate_limit_exceeded: Rate limit reached"},
		{name: "retry-after-ms", reply: wiretest.JSON(429, rateLimit).With("Retry-After-Ms", "1500"), cat: llm.RateLimit, status: 429, retryAfter: 1500 * time.Millisecond},
		{name: "quota", reply: wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), cat: llm.Auth, status: 429},
		{name: "context length", reply: wiretest.JSON(400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`), cat: llm.ContextLength, status: 400},
		{name: "bad key", reply: wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: sk-test-****-key.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`), cat: llm.Auth, status: 401},
		{name: "bad request", reply: wiretest.JSON(400, `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`), cat: llm.InvalidRequest, status: 400, msg: "Unsupported parameter"},
		{name: "server error", reply: wiretest.JSON(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`), cat: llm.ServerError, status: 500},
		{name: "overloaded", reply: wiretest.JSON(503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}`).With("Retry-After", "5"), cat: llm.Overloaded, status: 503, retryAfter: 5 * time.Second},
		{name: "gateway timeout", reply: wiretest.Reply{Status: 504}, cat: llm.Timeout, status: 504, msg: "http 504: Gateway Timeout"},
		{name: "failed response", reply: wiretest.JSON(200, `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"upstream failed"},"output":[]}`), cat: llm.ServerError, msg: "upstream failed"},
		{name: "mid-stream error event", reply: wiretest.SSE(file(t, "midstream_error.sse")), stream: true, cat: llm.ServerError, msg: "The server had an error"},
		{name: "response.failed", reply: wiretest.SSE(file(t, "failed.sse")), stream: true, cat: llm.RateLimit, msg: "Rate limit reached"},
		{name: "truncated stream", reply: wiretest.SSE(file(t, "truncated.sse")), stream: true, cat: llm.Network, msg: "stream ended before response.completed"},
		{name: "malformed event", reply: wiretest.SSE("event: response.created\ndata: {\"type\":\n\n"), stream: true, cat: llm.ServerError, msg: "malformed stream event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			e, ok := llm.AsError(err)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Provider != "openai_responses" || e.Category != tt.cat || e.Status != tt.status || e.RetryAfter != tt.retryAfter {
				t.Errorf("got %+v", e)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msg)
			}
		})
	}
}

func TestCancelDuringStream(t *testing.T) {
	first := strings.SplitAfter(file(t, "text_stream.sse"), "\n\n")
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: strings.Join(first[:5], ""), Hold: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		resp, err := newProvider(t, srv).Complete(ctx, &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: true,
			OnDelta: func(llm.Delta) { cancel() }})
		if resp != nil {
			err = errors.New("a reply after cancellation")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if _, ok := llm.AsError(err); ok {
			t.Errorf("cancellation reported as *llm.Error: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after cancellation")
	}
}

func TestRequestTimeout(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: ": stalled\n\n", Hold: true})
	p := newProvider(t, srv, func(c *openairesponses.Config) { c.Timeout = 100 * time.Millisecond })
	_, err := p.Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{user("hi")}, Stream: true})
	if e, ok := llm.AsError(err); !ok || e.Category != llm.Timeout || !e.Retryable() {
		t.Fatalf("got %v, want a timeout *llm.Error", err)
	}
}

// TestKeyNeverInErrors drives every error path with a server that puts the
// key in what it sends back.
func TestKeyNeverInErrors(t *testing.T) {
	tests := []struct {
		name   string
		reply  wiretest.Reply
		stream bool
		base   string
	}{
		{name: "json error echoing the key", reply: wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`","type":"invalid_request_error","code":"invalid_api_key"}}`)},
		{name: "non-json body echoing headers", reply: wiretest.Reply{Status: 500, Body: "upstream rejected request headers:\n", EchoHeaders: true}},
		{name: "rate limit echoing headers", reply: wiretest.Reply{Status: 429, Body: "too many: ", EchoHeaders: true}},
		{name: "error event echoing the key", reply: wiretest.SSE(`data: {"type":"error","code":"server_error","message":"bad token Bearer ` + testKey + `"}` + "\n\n"), stream: true},
		{name: "failed response echoing the key", reply: wiretest.JSON(200, `{"status":"failed","error":{"code":"server_error","message":"key `+testKey+` revoked"}}`)},
		{name: "key in the base url", base: "http://127.0.0.1:1/v1?key=" + testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t)
			if tt.base == "" {
				srv = wiretest.NewServer(t, tt.reply)
			}
			p := newProvider(t, srv, func(c *openairesponses.Config) {
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
	if _, err := openairesponses.New(openairesponses.Config{BaseURL: "api.openai.com"}); err == nil || err.Error() != `openai_responses: base url "api.openai.com" is not an http(s) url` {
		t.Errorf("got %v", err)
	}
	p, _ := openairesponses.New(openairesponses.Config{})
	if p.Name() != "openai_responses" {
		t.Errorf("name %q", p.Name())
	}
	if _, err := p.Complete(context.Background(), &llm.Request{}); err == nil || err.Error() != "openai_responses: invalid_request: no model given" {
		t.Errorf("empty model: %v", err)
	}
	env := map[string]string{"OPENAI_API_KEY": testKey, "OPENAI_BASE_URL": "https://proxy.example/v1"}
	got := openairesponses.ConfigFromEnv(func(k string) string { return env[k] })
	if got != (openairesponses.Config{Name: "openai_responses", BaseURL: "https://proxy.example/v1", APIKey: testKey}) {
		t.Errorf("ConfigFromEnv: %+v", got)
	}
}
