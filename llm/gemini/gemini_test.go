package gemini_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/sessions"
)

// testKey is an obviously fake key; tests check it never leaks.
const testKey = "AIza-test-not-a-real-key"

func newProvider(t *testing.T, srv *wiretest.Server, edit ...func(*gemini.Config)) *gemini.Provider {
	t.Helper()
	cfg := gemini.Config{BaseURL: srv.URL, APIKey: testKey}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := gemini.New(cfg)
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
	temp := 0.5
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model:       "gemini-2.5-flash",
		System:      "You are terse.",
		Messages:    []sessions.Message{user("Say hello."), {Role: sessions.RoleSystem, Text: "Answer in English."}},
		Temperature: &temp,
		MaxTokens:   100,
		Stop:        []string{"END"},
		Stream:      true,
		OnDelta:     func(d llm.Delta) { deltas = append(deltas, d.Text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{Text: "Hello there! Ça va?", Usage: llm.Usage{InputTokens: 9, OutputTokens: 6}, StopReason: llm.StopEnd, Model: "gemini-2.5-flash", Provider: "gemini"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if got := strings.Join(deltas, "|"); got != "Hello| there! Ça| va?" {
		t.Errorf("deltas %q", got)
	}
	r := srv.Requests()[0]
	if r.Method != "POST" || r.URL != "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("request %s %s", r.Method, r.URL)
	}
	for k, v := range map[string]string{"X-Goog-Api-Key": testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if r.Header.Get("Authorization") != "" {
		t.Errorf("authorization header sent")
	}
	wiretest.Golden(t, "testdata/text_stream_request.golden.json", r.Body)
}

// TestComplete: a non-streamed reply whose signature sits on its text
// part; the part is kept exactly, the cached and thought counts read.
func TestComplete(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "models/gemini-2.5-pro", Messages: []sessions.Message{user("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hello! How can I help you today?",
		Thinking:   []sessions.Block{{Type: sessions.BlockThinking, Origin: "gemini", Data: `[{"text":"Hello! How can I help you today?","thoughtSignature":"EsoBCscBAdHtim9"}]`}},
		Usage:      llm.Usage{InputTokens: 2006, OutputTokens: 274, CacheReadTokens: 1920, ReasoningTokens: 256},
		StopReason: llm.StopEnd,
		Model:      "gemini-2.5-pro",
		Provider:   "gemini",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("got %+v\nwant %+v", resp, want)
	}
	if r := srv.Requests()[0]; r.URL != "/v1beta/models/gemini-2.5-pro:generateContent" || r.Header.Get("Accept") != "application/json" {
		t.Errorf("request %s, accept %q", r.URL, r.Header.Get("Accept"))
	}
}

// TestThinkingParallelToolLoop: thoughts stream as thinking deltas; two
// parallel calls, only the first signed; the next request carries the
// model turn with the signature in the part it came with, and both results
// in one user turn.
func TestThinkingParallelToolLoop(t *testing.T) {
	stream := file(t, "thinking_tools_stream.sse")
	srv := wiretest.NewServer(t, wiretest.SSE(stream), wiretest.SSE(file(t, "text_stream.sse")))
	p := newProvider(t, srv)
	var thinking strings.Builder
	req := &llm.Request{Model: "gemini-3-pro-preview", Messages: []sessions.Message{user("Weather in Paris and Tokyo?")}, Tools: []llm.ToolSpec{weatherTool, {Name: "ping"}},
		ToolChoice: "auto", Thinking: &llm.Thinking{BudgetTokens: 2048}, Stream: true, OnDelta: func(d llm.Delta) { thinking.WriteString(d.Thinking) }}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	thought := "**Planning the lookups**\n\nThe user wants two cities; I will call get_weather twice."
	if thinking.String() != thought {
		t.Errorf("thinking deltas %q", thinking.String())
	}
	wantCalls := []sessions.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: map[string]any{"location": "Paris", "days": int64(2)}},
		{ID: "call_2", Name: "get_weather", Arguments: map[string]any{"location": "Tokyo"}},
	}
	if !reflect.DeepEqual(first.ToolCalls, wantCalls) || first.StopReason != llm.StopToolUse {
		t.Fatalf("first reply %+v", first)
	}
	if first.Usage != (llm.Usage{InputTokens: 120, OutputTokens: 115, CacheReadTokens: 64, ReasoningTokens: 85}) {
		t.Errorf("usage %+v", first.Usage)
	}
	if len(first.Thinking) != 1 || first.Thinking[0].Thinking != thought || first.Thinking[0].Origin != "gemini" {
		t.Fatalf("thinking %+v", first.Thinking)
	}
	// The signature exactly as the server sent it.
	sig := `"thoughtSignature":"CiQB0e2Kb7Ct/fQwCl1ZexVPYyPTMSJvgRCTxxcPL+Hp9nATqYQKfAHR7YpvBUsn<&>"`
	if !strings.Contains(stream, sig) {
		t.Fatal("fixture without the signature")
	}
	// Through a store's JSON form.
	msg := sessions.Message{Role: sessions.RoleAssistant, Blocks: append(first.Thinking, sessions.Block{Type: sessions.BlockText}), ToolCalls: first.ToolCalls}
	data, err := msg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored sessions.Message
	if err := stored.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages, stored,
		sessions.Message{Role: sessions.RoleTool, ToolCallID: "call_1", Name: "get_weather", Text: "sunny"},
		sessions.Message{Role: sessions.RoleTool, ToolCallID: "call_2", Text: "rain", IsError: true})
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := string(srv.Requests()[1].Body)
	if want := `{"functionCall":{"name":"get_weather","args":{"location":"Paris","days":2}},` + sig + `},{"functionCall":{"name":"get_weather","args":{"location":"Tokyo"}}}`; !strings.Contains(body, want) {
		t.Errorf("the model turn was not sent back unchanged:\n%s\nwant it to contain\n%s", body, want)
	}
	wiretest.Golden(t, "testdata/tool_loop_request.golden.json", srv.Requests()[1].Body)
}

// TestSignatureInLastChunk: a signature that arrives alone in the last
// chunk belongs to the text before it, which is sent back whole.
func TestSignatureInLastChunk(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "signature_last_stream.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gemini-3-pro-preview", Messages: []sessions.Message{user("weather?")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []sessions.Block{{Type: sessions.BlockThinking, Origin: "gemini", Data: `[{"text":"It is sunny in Paris.","thoughtSignature":"Q2lRQjBlMkt="}]`}}
	if resp.Text != "It is sunny in Paris." || !reflect.DeepEqual(resp.Thinking, want) || resp.Usage.OutputTokens != 28 {
		t.Errorf("got %+v", resp)
	}
}

// TestPlainHistory: a transcript without kept parts (another provider's,
// or a script's) becomes text and functionCall parts, images inlineData,
// required tool choice ANY restricted to one tool.
func TestPlainHistory(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "max_tokens_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{
		Model: "gemini-2.5-flash",
		Messages: []sessions.Message{
			{Role: sessions.RoleUser, Blocks: []sessions.Block{{Type: sessions.BlockText, Text: "What is this?"}, {Type: sessions.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
			{Role: sessions.RoleAssistant, Blocks: []sessions.Block{{Type: sessions.BlockThinking, Thinking: "hmm", Signature: "anthropic-sig"}, {Type: sessions.BlockText, Text: "Let me check."}},
				ToolCalls: []sessions.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: map[string]any{"location": "Oslo"}}}},
			{Role: sessions.RoleTool, ToolCallID: "toolu_1", Text: "cold"},
			user("Thanks."),
		},
		Tools:      []llm.ToolSpec{weatherTool},
		ToolChoice: "get_weather",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "The first part of" || resp.StopReason != llm.StopMaxTokens || resp.Thinking != nil {
		t.Errorf("got %+v", resp)
	}
	wiretest.Golden(t, "testdata/plain_history_request.golden.json", srv.Requests()[0].Body)
}

func TestErrors(t *testing.T) {
	quota := `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10. Please retry in 37.6s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`
	tests := []struct {
		name       string
		reply      wiretest.Reply
		stream     bool
		cat        llm.Category
		status     int
		retryAfter time.Duration
		msg        string
	}{
		{name: "rate limit with RetryInfo", reply: wiretest.JSON(429, quota), cat: llm.RateLimit, status: 429, retryAfter: 37 * time.Second, msg: "http 429: RESOURCE_EXHAUSTED: You exceeded your current quota"},
		{name: "retry-after header wins", reply: wiretest.JSON(429, quota).With("Retry-After", "3"), cat: llm.RateLimit, status: 429, retryAfter: 3 * time.Second},
		{name: "bad key", reply: wiretest.JSON(400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`), cat: llm.Auth, status: 400},
		{name: "permission denied", reply: wiretest.JSON(403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`), cat: llm.Auth, status: 403},
		{name: "context length", reply: wiretest.JSON(400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`), cat: llm.ContextLength, status: 400},
		{name: "bad request", reply: wiretest.JSON(400, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}`), cat: llm.InvalidRequest, status: 400, msg: "INVALID_ARGUMENT: Function call is missing a thought_signature"},
		{name: "unknown model", reply: wiretest.JSON(404, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}`), cat: llm.InvalidRequest, status: 404},
		{name: "internal", reply: wiretest.JSON(500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`), cat: llm.ServerError, status: 500},
		{name: "overloaded", reply: wiretest.JSON(503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`).With("Retry-After", "4"), cat: llm.Overloaded, status: 503, retryAfter: 4 * time.Second},
		{name: "deadline", reply: wiretest.JSON(504, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`), cat: llm.Timeout, status: 504},
		{name: "error as a list", reply: wiretest.JSON(429, `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`), cat: llm.RateLimit, status: 429},
		{name: "html body", reply: wiretest.Reply{Status: 502, Body: "<html><body>Bad Gateway</body></html>"}, cat: llm.ServerError, status: 502, msg: "http 502: <html>"},
		{name: "blocked prompt", reply: wiretest.JSON(200, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":8}}`), cat: llm.InvalidRequest, msg: "the prompt was blocked: SAFETY"},
		{name: "no candidates", reply: wiretest.JSON(200, `{"usageMetadata":{"promptTokenCount":8}}`), cat: llm.ServerError, msg: "the reply has no candidates"},
		{name: "mid-stream error", reply: wiretest.SSE(file(t, "midstream_error.sse")), stream: true, cat: llm.Overloaded, msg: "error in the reply: UNAVAILABLE: The model is overloaded"},
		{name: "truncated stream", reply: wiretest.SSE(file(t, "truncated.sse")), stream: true, cat: llm.Network, msg: "stream ended before a finish reason"},
		{name: "malformed chunk", reply: wiretest.SSE("data: {\"candidates\": [\n\n"), stream: true, cat: llm.ServerError, msg: "malformed reply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tt.reply)
			_, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			e, ok := llm.AsError(err)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Provider != "gemini" || e.Category != tt.cat || e.Status != tt.status || e.RetryAfter != tt.retryAfter {
				t.Errorf("got %+v", e)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msg)
			}
		})
	}
}

func TestRetryAfterThenSuccess(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.JSON(429, `{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`),
		wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	resp, err := policy.Call(context.Background(), func() (*llm.Response, error) {
		return p.Complete(context.Background(), &llm.Request{Model: "gemini-2.5-pro", Messages: []sessions.Message{user("hi")}})
	})
	if err != nil || resp.Text == "" {
		t.Fatal(resp, err)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{2 * time.Second}) {
		t.Errorf("waits %v", sleeper.Waits)
	}
}

func TestCancelDuringStream(t *testing.T) {
	first := strings.SplitAfter(file(t, "text_stream.sse"), "\r\n\r\n")[0]
	srv := wiretest.NewServer(t, wiretest.Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: first, Hold: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		resp, err := newProvider(t, srv).Complete(ctx, &llm.Request{Model: "gemini-2.5-flash", Messages: []sessions.Message{user("hi")}, Stream: true,
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
	p := newProvider(t, srv, func(c *gemini.Config) { c.Timeout = 100 * time.Millisecond })
	_, err := p.Complete(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: []sessions.Message{user("hi")}, Stream: true})
	if e, ok := llm.AsError(err); !ok || e.Category != llm.Timeout || !e.Retryable() {
		t.Fatalf("got %v, want a timeout *llm.Error", err)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	tests := []struct {
		name   string
		reply  wiretest.Reply
		stream bool
		base   string
	}{
		{name: "json error echoing the key", reply: wiretest.JSON(400, `{"error":{"code":400,"message":"API key not valid: `+testKey+`","status":"INVALID_ARGUMENT"}}`)},
		{name: "non-json body echoing headers", reply: wiretest.Reply{Status: 500, Body: "upstream rejected request headers:\n", EchoHeaders: true}},
		{name: "rate limit echoing headers", reply: wiretest.Reply{Status: 429, Body: "too many: ", EchoHeaders: true}},
		{name: "mid-stream error echoing the key", reply: wiretest.SSE(`data: {"error":{"code":500,"message":"bad key ` + testKey + `","status":"INTERNAL"}}` + "\n\n"), stream: true},
		{name: "key in the base url", base: "http://127.0.0.1:1/?key=" + testKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wiretest.NewServer(t)
			if tt.base == "" {
				srv = wiretest.NewServer(t, tt.reply)
			}
			p := newProvider(t, srv, func(c *gemini.Config) {
				if tt.base != "" {
					c.BaseURL = tt.base
				}
			})
			_, err := p.Complete(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: []sessions.Message{user("hi")}, Stream: tt.stream})
			wiretest.CheckScrubbed(t, err, testKey)
		})
	}
}

func TestNew(t *testing.T) {
	if _, err := gemini.New(gemini.Config{BaseURL: "generativelanguage.googleapis.com"}); err == nil || err.Error() != `gemini: base url "generativelanguage.googleapis.com" is not an http(s) url` {
		t.Errorf("got %v", err)
	}
	p, _ := gemini.New(gemini.Config{})
	if _, err := p.Complete(context.Background(), &llm.Request{}); err == nil || err.Error() != "gemini: invalid_request: no model given" {
		t.Errorf("empty model: %v", err)
	}
	env := map[string]string{"GOOGLE_API_KEY": "g", "GEMINI_BASE_URL": "https://proxy.example"}
	if got := gemini.ConfigFromEnv(func(k string) string { return env[k] }); got != (gemini.Config{BaseURL: "https://proxy.example", APIKey: "g"}) {
		t.Errorf("ConfigFromEnv: %+v", got)
	}
	env["GEMINI_API_KEY"] = "k"
	if got := gemini.ConfigFromEnv(func(k string) string { return env[k] }); got.APIKey != "k" {
		t.Errorf("GEMINI_API_KEY does not win: %+v", got)
	}
}
