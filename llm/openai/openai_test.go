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
	"github.com/skein-dev/skein/sessions/message"
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

// TestToolWithoutArguments: empty arguments are the empty object, and a
// tool call is a tool_use stop even when finish_reason says stop (as
// Ollama sends it).
func TestToolWithoutArguments(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "no_args_tool.sse")))
	p := newProvider(t, srv, func(c *openai.Config) { c.Name = "ollama"; c.APIKey = "" })
	resp, err := p.Complete(context.Background(), &llm.Request{Model: "llama3.2", Messages: []message.Message{wiretest.User("list files")}, Tools: []llm.ToolSpec{{Name: "list_files"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []message.ToolCall{{ID: "call_9zq3", Name: "list_files", Arguments: map[string]any{}}}
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
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []message.Message{wiretest.User("write")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []message.ToolCall{{ID: "call_cut", Name: "write_file", Arguments: map[string]any{openai.RawArgumentsKey: `{"path": "notes.txt", "text": "a long te`}}}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.StopReason != llm.StopMaxTokens {
		t.Errorf("got %+v", resp)
	}
}

// TestRequestMapping covers content blocks, the request options and a
// thinking block sent back (dropped: Chat Completions takes none).
func TestRequestMapping(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	temp := 0.25
	_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model: "gpt-4.1",
		Messages: []message.Message{
			{Role: message.RoleUser, Blocks: []message.Block{
				{Type: message.BlockText, Text: "What is in this picture?"},
				{Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
			}},
			{Role: message.RoleAssistant, Blocks: []message.Block{
				{Type: message.BlockThinking, Thinking: "A small image.", Signature: "sig"},
				{Type: message.BlockText, Text: "A red square."},
			}},
			{Role: message.RoleSystem, Text: "Answer in French from now on."},
			wiretest.User("And now?"),
		},
		Tools:       []llm.ToolSpec{wiretest.WeatherTool, {Name: "ping", Description: "Checks the connection."}},
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
		if _, err := p.Complete(context.Background(), &llm.Request{Model: "m", Messages: []message.Message{wiretest.User("hi")}, MaxTokens: 50, ToolChoice: "required"}); err != nil {
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
	protocol.CheckErrors(t, []wiretest.ErrorCase{
		{Name: "quota is terminal", Reply: wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`).With("X-Should-Retry", "true"), Category: llm.Auth, Status: 429, Msg: "insufficient_quota: You exceeded your current quota"},
		{Name: "vllm context length", Reply: wiretest.JSON(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`), Category: llm.ContextLength, Status: 400},
		{Name: "forbidden", Reply: wiretest.JSON(403, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`), Category: llm.Auth, Status: 403},
		{Name: "unknown model", Reply: wiretest.JSON(404, `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`), Category: llm.InvalidRequest, Status: 404},
		{Name: "should not retry", Reply: wiretest.JSON(503, `{"error":{"message":"busy","type":"server_error"}}`).With("X-Should-Retry", "false"), Category: llm.Overloaded, Status: 503, NoRetry: true},
		{Name: "should retry", Reply: wiretest.JSON(409, `{"error":{"message":"lock timeout","type":"invalid_request_error"}}`).With("X-Should-Retry", "true"), Category: llm.ServerError, Status: 409},
		{Name: "html body", Reply: wiretest.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"}, Category: llm.ServerError, Status: 502, Msg: "http 502: <html> <head><title>502 Bad Gateway</title></head>"},
		{Name: "plain text body", Reply: wiretest.Reply{Status: 400, Body: "model is required\n"}, Category: llm.InvalidRequest, Status: 400, Msg: "http 400: model is required"},
		{Name: "empty body", Reply: wiretest.Reply{Status: 504}, Category: llm.Timeout, Status: 504, Msg: "http 504: Gateway Timeout"},
		{Name: "error in a 200 body", Reply: wiretest.JSON(200, `{"error":{"message":"upstream failed","type":"server_error"}}`), Category: llm.ServerError, Msg: "error in the reply: server_error: upstream failed"},
		{Name: "mid-stream rate limit", Reply: wiretest.SSE(`data: {"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}` + "\n\n"), Stream: true, Category: llm.RateLimit},
		{Name: "mid-stream error with a status code", Reply: wiretest.SSE(`data: {"error":{"object":"error","message":"busy","type":"ServiceUnavailableError","code":503}}` + "\n\n"), Stream: true, Category: llm.Overloaded},
		{Name: "malformed chunk", Reply: wiretest.SSE("data: {\"choices\": [\n\n"), Stream: true, Category: llm.ServerError, Msg: "malformed stream chunk"},
		{Name: "no choices", Reply: wiretest.JSON(200, `{"id":"x","choices":[]}`), Category: llm.ServerError, Msg: "the reply has no choices"},
	})
}

func TestQuotaIsNotRetried(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 3, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	_, err := policy.Call(context.Background(), func() (*llm.Response, error) {
		return p.Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []message.Message{wiretest.User("hi")}})
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
	resp, err := llm.Fallback(context.Background(), chain, policy, &llm.Request{Model: "gpt-4.1", Messages: []message.Message{wiretest.User("hi")}})
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
			want:  &llm.Response{ToolCalls: []message.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: map[string]any{"location": "Oslo"}}}, StopReason: llm.StopToolUse, Model: "m", Provider: "openai"},
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
			want:   &llm.Response{ToolCalls: []message.ToolCall{{ID: "a", Name: "f", Arguments: map[string]any{}}, {ID: "b", Name: "g", Arguments: map[string]any{"x": int64(1)}}}, StopReason: llm.StopToolUse, Model: "m", Provider: "openai"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "m", Messages: []message.Message{wiretest.User("hi")}, Stream: tt.stream})
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
	resp, err := newProvider(t, srv).Complete(ctx, &llm.Request{Model: "gpt-4.1", Messages: []message.Message{wiretest.User("hi")}, Stream: true,
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
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "my gpt-4o", Messages: []message.Message{wiretest.User("hi")}, MaxTokens: 20}); err != nil {
		t.Fatal(err)
	}
	p = newProvider(t, srv, func(c *openai.Config) { c.Name = "azure"; c.APIVersion = "2025-04-01-preview" })
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "o4-mini", Messages: []message.Message{wiretest.User("hi")}, Thinking: &llm.Thinking{BudgetTokens: 20000}}); err != nil {
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
