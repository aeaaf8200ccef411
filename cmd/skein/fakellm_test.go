package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"
)

// fakeKey is the API key CLI tests give the fake server; tests check it
// never appears in any output or file.
const fakeKey = "sk-test-not-a-real-key-7f3a9c"

// fakeOpenAI is a loopback server speaking the OpenAI Chat Completions
// wire format (streaming SSE or JSON) for CLI tests. It answers
// deterministically from the request:
//
//   - the last message is a tool result: "The tool said: <result>";
//   - tools are offered: a call of the first tool with {"city": "Paris"};
//   - structured output asked for (response_format): the JSON object
//     {"echo": "<last user message>"};
//   - otherwise: "echo: <last user message>".
//
// Model "stall" streams the first half of its text, then stalls until the
// client goes away (to test cancellation mid-stream).
// Model "echo-key" answers with the request's Authorization header in its
// text and in its tool call's arguments (a careless or hostile server),
// to prove skein redacts keys from replies.
// Model "echo-key-ids" puts the Authorization header in its reply's
// model field and in its tool call's name and id instead.
// Model "fail-auth" answers 401 with the request's Authorization header
// echoed in the body (a careless server), to prove skein scrubs keys.
// Every answer waits delay first.
type fakeOpenAI struct {
	*httptest.Server
	delay time.Duration
	calls atomic.Int64
}

func newFakeOpenAI(delay time.Duration) *fakeOpenAI {
	f := &fakeOpenAI{delay: delay}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

type fakeRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat any `json:"response_format"`
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+fakeKey || req.Model == "fail-auth" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","code":"invalid_api_key"}}`,
			r.Header.Get("Authorization"))
		return
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	last := req.Messages[len(req.Messages)-1]
	text, call := "", ""
	switch {
	case req.Model == "echo-key" && len(req.Tools) > 0 && last.Role != "tool":
		call = req.Tools[0].Function.Name
	case req.Model == "echo-key":
		text = "your key is " + r.Header.Get("Authorization")
	case req.Model == "echo-key-ids" && last.Role != "tool":
		call = "lookup_" + r.Header.Get("Authorization")
	case req.Model == "echo-key-ids":
		text = "done"
	case last.Role == "tool":
		text = fmt.Sprintf("The tool said: %v", last.Content)
	case len(req.Tools) > 0:
		call = req.Tools[0].Function.Name
	case req.ResponseFormat != nil:
		data, _ := json.Marshal(map[string]any{"echo": fmt.Sprint(last.Content)})
		text = string(data)
	default:
		text = fmt.Sprintf("echo: %v", last.Content)
	}
	if req.Stream {
		f.stream(w, r, req.Model, text, call)
		return
	}
	msg := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	callID, model := "call_fake_1", req.Model
	if req.Model == "echo-key-ids" {
		callID, model = "call_"+r.Header.Get("Authorization"), r.Header.Get("Authorization")
	}
	if call != "" {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
			"function": map[string]any{"name": call, "arguments": fakeArguments(req.Model, r)}}}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
}

// fakeArguments are the arguments of the fake's tool calls.
func fakeArguments(model string, r *http.Request) string {
	if model == "echo-key" {
		data, _ := json.Marshal(map[string]any{"city": r.Header.Get("Authorization")})
		return string(data)
	}
	return `{"city": "Paris"}`
}

// stream writes the reply as SSE chunks: the text in two deltas, or a
// tool call with its arguments in two fragments, then usage and [DONE].
func (f *fakeOpenAI) stream(w http.ResponseWriter, r *http.Request, model, text, call string) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any, usage any) {
		choices := []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		if usage != nil {
			choices = []any{}
		}
		data, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
			"choices": choices, "usage": usage})
		fmt.Fprintf(w, "data: %s\n\n", data)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if call != "" {
		args := fakeArguments(model, r)
		half := len(args) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_fake_1", "type": "function",
			"function": map[string]any{"name": call, "arguments": args[:half]}}}}, nil, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[half:]}}}}, nil, nil)
		chunk(map[string]any{}, "tool_calls", nil)
	} else {
		half := len(text) / 2
		for strings.TrimSpace(text[:half]) == "" && half < len(text) {
			half++
		}
		chunk(map[string]any{"content": text[:half]}, nil, nil)
		if model == "stall" {
			<-r.Context().Done()
			return
		}
		chunk(map[string]any{"content": text[half:]}, nil, nil)
		chunk(map[string]any{}, "stop", nil)
	}
	chunk(nil, nil, map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
