package anthropic_test

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/internal/wiretest"
)

// TestConformance runs the client through the cases every protocol
// shares (llm/internal/wiretest).
func TestConformance(t *testing.T) { wiretest.Run(t, protocol) }

// protocol is the client's adapter to the shared cases.
var protocol = wiretest.Protocol{
	Name: "anthropic", Model: "claude-sonnet-4-5", Key: testKey,
	New: func(base, key string, timeout time.Duration) (llm.Provider, error) {
		return anthropic.New(anthropic.Config{BaseURL: base, APIKey: key, Timeout: timeout})
	},
	Plain: wiretest.Case{File: "text_response.json", Text: "Hi! My name is Claude.", Model: "claude-sonnet-4-5-20250929",
		Usage: llm.Usage{InputTokens: 21 + 1024 + 188086, OutputTokens: 393, CacheReadTokens: 1024, CacheWriteTokens: 188086}},
	Stream:     wiretest.Case{File: "text_stream.sse", Text: "Hello there! Ça va?", Model: "claude-sonnet-4-5-20250929", Usage: llm.Usage{InputTokens: 25, OutputTokens: 15}},
	ToolCall:   wiretest.Case{File: "tool_use_stream.sse", Text: "Okay, let's check the weather for Paris:", Model: "claude-sonnet-4-5-20250929", Usage: llm.Usage{InputTokens: 472, OutputTokens: 89}},
	Parallel:   wiretest.Case{File: "parallel_tools.sse", Model: "claude-sonnet-4-5-20250929", Usage: llm.Usage{InputTokens: 510, OutputTokens: 131}},
	Structured: wiretest.Case{File: "structured_response.json", Text: `{"city":"Paris","country":"France","population_millions":2.1}`, Model: "claude-sonnet-4-5-20250929", Usage: llm.Usage{InputTokens: 92, OutputTokens: 17}},
	Thinking: wiretest.Case{File: "thinking_stream.sse", Model: "claude-sonnet-4-5-20250929", Usage: llm.Usage{InputTokens: 630, OutputTokens: 120},
		Kept: []string{`"signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+Ab7NDxx8EP0Fl2wu2uBmVkmjcAsDHqDQz9jrHK4LMqHs8a8nEb6OvsdRi7ZpMBGP=="`}},
	Errors: map[llm.Category]wiretest.Reply{
		llm.RateLimit:      wiretest.JSON(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`),
		llm.Overloaded:     wiretest.JSON(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		llm.ServerError:    wiretest.JSON(500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
		llm.Timeout:        wiretest.JSON(504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`),
		llm.Auth:           wiretest.JSON(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`),
		llm.InvalidRequest: wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`),
		llm.ContextLength:  wiretest.JSON(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`),
	},
	MidStream: "midstream_error.sse", MidStreamCategory: llm.Overloaded,
	Truncated: "truncated.sse",
	KeyEchoed: func(key string) []wiretest.Reply {
		return []wiretest.Reply{
			wiretest.JSON(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: `+key+`"}}`),
			wiretest.SSE("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"key " + key + "\"}}\n\n"),
		}
	},
}
