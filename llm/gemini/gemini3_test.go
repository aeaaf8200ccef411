package gemini_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/sessions/message"
)

// TestGemini3FunctionCallIDs replays Gemini 3 tool-calling exchanges,
// streamed and not: the reply's functionCall ids become the tool calls'
// ids, and the next request echoes each as its functionResponse's id,
// with the calls' parts (ids and thoughtSignature) sent back unchanged.
func TestGemini3FunctionCallIDs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  wiretest.Reply
		stream bool
		ids    []string
		sig    string
	}{
		{"complete", wiretest.JSON(200, file(t, "gemini3_tool_response.json")), false, []string{"8kq3rj1v", "x1m0c7pa"}, "CuQBAdHtim8vZ2VtaW5pMy1zaWduYXR1cmUtb25lCg=="},
		{"stream", wiretest.SSE(file(t, "gemini3_tool_stream.sse")), true, []string{"q7d2mz0e", "r5n8wk3c"}, "CuQBAdHtim9zdHJlYW0tc2lnbmF0dXJlLXR3bwo="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.NewServer(t, tc.reply, wiretest.JSON(200, file(t, "text_response.json")))
			p := newProvider(t, srv)
			req := &llm.Request{Model: "gemini-3-pro-preview", Messages: []message.Message{wiretest.User("Weather in Paris and Tokyo?")},
				Tools: []llm.ToolSpec{wiretest.WeatherTool}, Stream: tc.stream}
			first, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.ToolCalls) != len(tc.ids) {
				t.Fatalf("%d tool calls, want %d: %+v", len(first.ToolCalls), len(tc.ids), first.ToolCalls)
			}
			for i, id := range tc.ids {
				if first.ToolCalls[i].ID != id {
					t.Errorf("tool call %d has id %q, want the provider's %q", i, first.ToolCalls[i].ID, id)
				}
			}
			msg := message.Message{Role: message.RoleAssistant, ToolCalls: first.ToolCalls, Blocks: first.Thinking}
			data, err := msg.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var stored message.Message
			if err := stored.UnmarshalJSON(data); err != nil {
				t.Fatal(err)
			}
			req.Messages = append(req.Messages, stored)
			for _, call := range first.ToolCalls {
				req.Messages = append(req.Messages, message.Message{Role: message.RoleTool, ToolCallID: call.ID, Text: "sunny"})
			}
			req.Stream = false
			if _, err := p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			checkEchoed(t, srv.Requests()[1].Body, tc.ids, tc.sig)
		})
	}
}

// TestFunctionCallIDsWithoutSignature: a stored call with a provider's
// id and no kept parts is re-encoded with its id, and its result echoes
// it; an id skein made up for a call without one is never sent.
func TestFunctionCallIDsWithoutSignature(t *testing.T) {
	srv := wiretest.NewServer(t, wiretest.JSON(200, file(t, "text_response.json")), wiretest.JSON(200, file(t, "text_response.json")))
	p := newProvider(t, srv)
	history := func(id string) []message.Message {
		return []message.Message{wiretest.User("Weather?"),
			{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: id, Name: "get_weather", Arguments: map[string]any{"location": "Oslo"}}}},
			{Role: message.RoleTool, ToolCallID: id, Text: "cold"}}
	}
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "gemini-3-pro-preview", Messages: history("8kq3rj1v")}); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, srv.Requests()[0].Body, []string{"8kq3rj1v"}, "")
	if _, err := p.Complete(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: history("call_1")}); err != nil {
		t.Fatal(err)
	}
	checkEchoed(t, srv.Requests()[1].Body, nil, "")
}

// checkEchoed checks that body's functionCall and functionResponse parts
// carry ids, in order (none when ids is nil), and that the first call
// keeps its thoughtSignature sig (when sig is not empty).
func checkEchoed(t *testing.T, body []byte, ids []string, sig string) {
	t.Helper()
	var sent struct {
		Contents []struct {
			Parts []struct {
				FunctionCall *struct {
					ID string `json:"id"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID string `json:"id"`
				} `json:"functionResponse"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	var calls, results []string
	signature := ""
	for _, c := range sent.Contents {
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				calls = append(calls, p.FunctionCall.ID)
				if signature == "" {
					signature = p.ThoughtSignature
				}
			}
			if p.FunctionResponse != nil {
				results = append(results, p.FunctionResponse.ID)
			}
		}
	}
	want := ids
	if want == nil {
		want = []string{""}
	}
	if len(calls) != len(want) || len(results) != len(want) {
		t.Fatalf("sent %d calls and %d results, want %d each:\n%s", len(calls), len(results), len(want), body)
	}
	for i := range want {
		if calls[i] != want[i] || results[i] != want[i] {
			t.Errorf("call %d sent with id %q and its result with %q, want %q:\n%s", i, calls[i], results[i], want[i], body)
		}
	}
	if signature != sig {
		t.Errorf("the first call's thoughtSignature is %q, want %q", signature, sig)
	}
}
