package gemini_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/sessions/message"
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

// TestComplete: a non-streamed reply whose signature sits on its text
// part; the part is kept exactly, the cached and thought counts read.
func TestComplete(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "models/gemini-2.5-pro", Messages: []message.Message{wiretest.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text:       "Hello! How can I help you today?",
		Thinking:   []message.Block{{Type: message.BlockThinking, Origin: "gemini", Data: `[{"text":"Hello! How can I help you today?","thoughtSignature":"EsoBCscBAdHtim9"}]`}},
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

// TestSignatureInLastChunk: a signature that arrives alone in the last
// chunk belongs to the text before it, which is sent back whole.
func TestSignatureInLastChunk(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.SSE(file(t, "signature_last_stream.sse")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gemini-3-pro-preview", Messages: []message.Message{wiretest.User("weather?")}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []message.Block{{Type: message.BlockThinking, Origin: "gemini", Data: `[{"text":"It is sunny in Paris.","thoughtSignature":"Q2lRQjBlMkt="}]`}}
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
		Messages: []message.Message{
			{Role: message.RoleUser, Blocks: []message.Block{{Type: message.BlockText, Text: "What is this?"}, {Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
			{Role: message.RoleAssistant, Blocks: []message.Block{{Type: message.BlockThinking, Thinking: "hmm", Signature: "anthropic-sig"}, {Type: message.BlockText, Text: "Let me check."}},
				ToolCalls: []message.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: map[string]any{"location": "Oslo"}}}},
			{Role: message.RoleTool, ToolCallID: "toolu_1", Text: "cold"},
			wiretest.User("Thanks."),
		},
		Tools:      []llm.ToolSpec{wiretest.WeatherTool},
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
	protocol.CheckErrors(t, []wiretest.ErrorCase{
		{Name: "rate limit with RetryInfo", Reply: wiretest.JSON(429, quota), Category: llm.RateLimit, Status: 429, RetryAfter: 37 * time.Second, Msg: "http 429: RESOURCE_EXHAUSTED: You exceeded your current quota"},
		{Name: "retry-after header wins", Reply: wiretest.JSON(429, quota).With("Retry-After", "3"), Category: llm.RateLimit, Status: 429, RetryAfter: 3 * time.Second},
		{Name: "bad key", Reply: wiretest.JSON(400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`), Category: llm.Auth, Status: 400},
		{Name: "unknown model", Reply: wiretest.JSON(404, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}`), Category: llm.InvalidRequest, Status: 404},
		{Name: "error as a list", Reply: wiretest.JSON(429, `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`), Category: llm.RateLimit, Status: 429},
		{Name: "html body", Reply: wiretest.Reply{Status: 502, Body: "<html><body>Bad Gateway</body></html>"}, Category: llm.ServerError, Status: 502, Msg: "http 502: <html>"},
		{Name: "blocked prompt", Reply: wiretest.JSON(200, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":8}}`), Category: llm.InvalidRequest, Msg: "the prompt was blocked: SAFETY"},
		{Name: "no candidates", Reply: wiretest.JSON(200, `{"usageMetadata":{"promptTokenCount":8}}`), Category: llm.ServerError, Msg: "the reply has no candidates"},
		{Name: "malformed chunk", Reply: wiretest.SSE("data: {\"candidates\": [\n\n"), Stream: true, Category: llm.ServerError, Msg: "malformed reply"},
	})
}

func TestRetryAfterThenSuccess(t *testing.T) {
	srv := wiretest.NewServer(t,
		wiretest.JSON(429, `{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`),
		wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	var sleeper wiretest.Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: wiretest.NoJitter}
	resp, err := policy.Call(context.Background(), func() (*llm.Response, error) {
		return p.Complete(context.Background(), &llm.Request{Model: "gemini-2.5-pro", Messages: []message.Message{wiretest.User("hi")}})
	})
	if err != nil || resp.Text == "" {
		t.Fatal(resp, err)
	}
	if !reflect.DeepEqual(sleeper.Waits, []time.Duration{2 * time.Second}) {
		t.Errorf("waits %v", sleeper.Waits)
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
}
