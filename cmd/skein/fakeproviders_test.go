package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// newFakeProviders is a loopback server speaking, streamed, the OpenAI
// Responses API (POST /v1/responses), Gemini's streamGenerateContent
// (POST /v1beta/models/M:streamGenerateContent?alt=sse), Anthropic
// Messages (POST /v1/messages) and Azure OpenAI's chat completions (POST
// /openai/deployments/D/chat/completions?api-version=V) for CLI tests.
// It answers like fakeOpenAI: after a tool result "The tool said:
// <result>", when tools are offered a call of the first with {"city":
// "Paris"}, else "echo: <last user text>". A request without fakeKey in
// the protocol's key header gets a 401.
func newFakeProviders() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var text, call string
		switch {
		case r.URL.Path == "/v1/responses" && r.Header.Get("Authorization") == "Bearer "+fakeKey:
			var req struct {
				Input []struct {
					Type    string `json:"type"`
					Role    string `json:"role"`
					Content any    `json:"content"`
					Output  string `json:"output"`
				} `json:"input"`
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			last := req.Input[len(req.Input)-1]
			switch {
			case last.Type == "function_call_output":
				text = "The tool said: " + last.Output
			case len(req.Tools) > 0:
				call = req.Tools[0].Name
			default:
				text = fmt.Sprintf("echo: %v", last.Content)
			}
			fakeResponsesStream(w, text, call)
		case strings.HasPrefix(r.URL.Path, "/v1beta/models/") && r.Header.Get("x-goog-api-key") == fakeKey:
			var req struct {
				Contents []struct {
					Parts []struct {
						Text             string `json:"text"`
						FunctionResponse *struct {
							Response map[string]any `json:"response"`
						} `json:"functionResponse"`
					} `json:"parts"`
				} `json:"contents"`
				Tools []struct {
					FunctionDeclarations []struct {
						Name string `json:"name"`
					} `json:"functionDeclarations"`
				} `json:"tools"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			parts := req.Contents[len(req.Contents)-1].Parts
			last := parts[len(parts)-1]
			switch {
			case last.FunctionResponse != nil:
				text = fmt.Sprintf("The tool said: %v", last.FunctionResponse.Response["result"])
			case len(req.Tools) > 0:
				call = req.Tools[0].FunctionDeclarations[0].Name
			default:
				text = "echo: " + last.Text
			}
			fakeGeminiStream(w, text, call)
		case r.URL.Path == "/v1/messages" && r.Header.Get("x-api-key") == fakeKey:
			var req struct {
				Messages []struct {
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			var blocks []struct {
				Type    string          `json:"type"`
				Text    string          `json:"text"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks) != nil {
				var s string
				json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &s)
				blocks = append(blocks[:0], struct {
					Type    string          `json:"type"`
					Text    string          `json:"text"`
					Content json.RawMessage `json:"content"`
				}{Type: "text", Text: s})
			}
			last := blocks[len(blocks)-1]
			switch {
			case last.Type == "tool_result":
				var result string
				json.Unmarshal(last.Content, &result)
				text = "The tool said: " + result
			case len(req.Tools) > 0:
				call = req.Tools[0].Name
			default:
				text = "echo: " + last.Text
			}
			fakeAnthropicStream(w, text, call)
		case strings.HasPrefix(r.URL.Path, "/openai/deployments/") && r.URL.Query().Get("api-version") != "" && r.Header.Get("api-key") == fakeKey:
			// Azure: the OpenAI fake's answers, at Azure's path and key
			r.URL.Path = "/v1/chat/completions"
			r.Header.Set("Authorization", "Bearer "+fakeKey)
			newFakeOpenAI(0).serve(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}
	}))
}

func sse(w http.ResponseWriter, event string, v any) {
	data, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
}

// fakeResponsesStream streams a reply: a reasoning item (with encrypted
// content), then the text in two deltas or a function call with its
// arguments in two fragments.
func fakeResponsesStream(w http.ResponseWriter, text, call string) {
	w.Header().Set("Content-Type", "text/event-stream")
	reasoning := map[string]any{"id": "rs_fake", "type": "reasoning", "summary": []any{}, "encrypted_content": "gAAAAfake"}
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": reasoning})
	var item map[string]any
	if call != "" {
		args := `{"city": "Paris"}`
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 1,
			"item": map[string]any{"type": "function_call", "id": "fc_fake", "call_id": "call_fake_1", "name": call, "arguments": ""}})
		for _, frag := range []string{args[:8], args[8:]} {
			sse(w, "response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "output_index": 1, "delta": frag})
		}
		item = map[string]any{"type": "function_call", "id": "fc_fake", "call_id": "call_fake_1", "name": call, "arguments": args, "status": "completed"}
	} else {
		half := len(text) / 2
		for _, d := range []string{text[:half], text[half:]} {
			sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": d})
		}
		item = map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 1, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": "resp_fake", "object": "response", "status": "completed", "model": "o4-mini-2025-04-16", "output": []any{reasoning, item},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 2}}}})
}

// fakeGeminiStream streams a reply: the text in two chunks, or a function
// call with a thought signature.
func fakeGeminiStream(w http.ResponseWriter, text, call string) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(parts []any, finish string) {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		sse(w, "", map[string]any{"candidates": []any{c}, "modelVersion": "gemini-2.5-flash",
			"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 2}})
	}
	if call != "" {
		chunk([]any{map[string]any{"functionCall": map[string]any{"name": call, "args": map[string]any{"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJl"}}, "STOP")
		return
	}
	half := len(text) / 2
	chunk([]any{map[string]any{"text": text[:half]}}, "")
	chunk([]any{map[string]any{"text": text[half:]}}, "STOP")
}

// fakeAnthropicStream streams a reply: a signed thinking block, then the
// text in two deltas or a tool_use block with its input in two fragments.
func fakeAnthropicStream(w http.ResponseWriter, text, call string) {
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5-20250929", "content": []any{}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
	sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": "Let me see."}})
	sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "signature_delta", "signature": "c2lnbmF0dXJl"}})
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	stop := "end_turn"
	if call != "" {
		stop = "tool_use"
		args := `{"city": "Paris"}`
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_fake_1", "name": call, "input": map[string]any{}}})
		for _, frag := range []string{args[:8], args[8:]} {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "text", "text": ""}})
		half := len(text) / 2
		for _, d := range []string{text[:half], text[half:]} {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "text_delta", "text": d}})
		}
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 5}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
