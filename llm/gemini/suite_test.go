package gemini_test

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/llm/internal/wiretest"
)

// TestConformance runs the client through the cases every protocol
// shares (llm/internal/wiretest).
func TestConformance(t *testing.T) { wiretest.Run(t, protocol) }

// protocol is the client's adapter to the shared cases.
var protocol = wiretest.Protocol{
	Name: "gemini", Model: "gemini-2.5-flash", Key: testKey,
	New: func(base, key string, timeout time.Duration) (llm.Provider, error) {
		return gemini.New(gemini.Config{BaseURL: base, APIKey: key, Timeout: timeout})
	},
	Plain: wiretest.Case{File: "text_response.json", Text: "Hello! How can I help you today?", Model: "gemini-2.5-pro",
		Usage: llm.Usage{InputTokens: 2006, OutputTokens: 274, CacheReadTokens: 1920, ReasoningTokens: 256}},
	Stream:     wiretest.Case{File: "text_stream.sse", Text: "Hello there! Ça va?", Model: "gemini-2.5-flash", Usage: llm.Usage{InputTokens: 9, OutputTokens: 6}},
	ToolCall:   wiretest.Case{File: "tool_call_stream.sse", Text: "Checking.", Model: "gemini-2.5-flash", Usage: llm.Usage{InputTokens: 61, OutputTokens: 24}},
	Parallel:   wiretest.Case{File: "parallel_tools.sse", Model: "gemini-2.5-flash", Usage: llm.Usage{InputTokens: 70, OutputTokens: 43}},
	Structured: wiretest.Case{File: "structured_response.json", Text: `{"city":"Paris","country":"France","population_millions":2.1}`, Model: "gemini-2.5-flash", Usage: llm.Usage{InputTokens: 92, OutputTokens: 17}},
	Thinking: wiretest.Case{File: "thinking_tools_stream.sse", Model: "gemini-3-pro-preview", Usage: llm.Usage{InputTokens: 120, OutputTokens: 115, CacheReadTokens: 64, ReasoningTokens: 85},
		Kept: []string{`"thoughtSignature":"CiQB0e2Kb7Ct/fQwCl1ZexVPYyPTMSJvgRCTxxcPL+Hp9nATqYQKfAHR7YpvBUsn<&>"`}},
	Errors: map[llm.Category]wiretest.Reply{
		llm.RateLimit:      wiretest.JSON(429, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`),
		llm.Overloaded:     wiretest.JSON(503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`),
		llm.ServerError:    wiretest.JSON(500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`),
		llm.Timeout:        wiretest.JSON(504, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`),
		llm.Auth:           wiretest.JSON(403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`),
		llm.InvalidRequest: wiretest.JSON(400, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}`),
		llm.ContextLength:  wiretest.JSON(400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`),
	},
	MidStream: "midstream_error.sse", MidStreamCategory: llm.Overloaded,
	Truncated: "truncated.sse",
	KeyEchoed: func(key string) []wiretest.Reply {
		return []wiretest.Reply{
			wiretest.JSON(400, `{"error":{"code":400,"message":"API key not valid: `+key+`","status":"INVALID_ARGUMENT"}}`),
			wiretest.SSE(`data: {"error":{"code":500,"message":"bad key ` + key + `","status":"INTERNAL"}}` + "\n\n"),
		}
	},
}
