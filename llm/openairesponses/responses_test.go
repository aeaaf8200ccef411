package openairesponses_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openairesponses"
	"github.com/skein-dev/skein/sessions/message"
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

// TestCompleteWithReasoning: a non-streamed reply of a reasoning model
// keeps its output items (compacted) in a thinking block.
func TestCompleteWithReasoning(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "o4-mini", Messages: []message.Message{wiretest.User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		Text: "It will be sunny in Paris, 21 °C.",
		Thinking: []message.Block{{Type: message.BlockThinking, Origin: "openai_responses",
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
		Messages:   []message.Message{wiretest.User("Weather in Paris for two days?")},
		Tools:      []llm.ToolSpec{wiretest.WeatherTool, {Name: "ping"}},
		ToolChoice: "auto",
		Stream:     true,
	}
	first, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []message.ToolCall{{ID: "call_12345xyz", Name: "get_weather", Arguments: map[string]any{"location": "Paris, France", "days": int64(2)}}}
	if !reflect.DeepEqual(first.ToolCalls, wantCalls) || first.StopReason != llm.StopToolUse || first.Text != "" || first.Thinking != nil {
		t.Fatalf("first reply %+v", first)
	}
	req.Messages = append(req.Messages,
		message.Message{Role: message.RoleAssistant, Text: "Checking.", ToolCalls: first.ToolCalls},
		message.Message{Role: message.RoleTool, ToolCallID: first.ToolCalls[0].ID, Name: "get_weather", Text: `{"today":"sunny, 21 °C"}`},
		message.Message{Role: message.RoleUser, Blocks: []message.Block{{Type: message.BlockText, Text: "And this?"}, {Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
	)
	req.ToolChoice = "get_weather"
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.Golden(t, "testdata/tool_loop_request.golden.json", srv.Requests()[1].Body)
}

func TestIncomplete(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "incomplete_response.json")))
	resp, err := newProvider(t, srv).Complete(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []message.Message{wiretest.User("hi")}, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "The first part of a long" || resp.StopReason != llm.StopMaxTokens {
		t.Errorf("got %+v", resp)
	}
}

func TestErrors(t *testing.T) {
	protocol.CheckErrors(t, []wiretest.ErrorCase{
		{Name: "quota", Reply: wiretest.JSON(429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), Category: llm.Auth, Status: 429},
		{Name: "failed response", Reply: wiretest.JSON(200, `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"upstream failed"},"output":[]}`), Category: llm.ServerError, Msg: "upstream failed"},
		{Name: "response.failed", Reply: wiretest.SSE(file(t, "failed.sse")), Stream: true, Category: llm.RateLimit, Msg: "Rate limit reached"},
		{Name: "malformed event", Reply: wiretest.SSE("event: response.created\ndata: {\"type\":\n\n"), Stream: true, Category: llm.ServerError, Msg: "malformed stream event"},
	})
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
}
