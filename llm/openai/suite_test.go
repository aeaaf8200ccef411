package openai_test

import (
	"time"

	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openai"
)

// TestConformance runs the client through the cases every protocol
// shares (llm/internal/wiretest).
func TestConformance(t *testing.T) { wiretest.Run(t, protocol) }

// protocol is the client's adapter to the shared cases.
var protocol = wiretest.Protocol{
	Name: "openai", Model: "gpt-4.1", Key: testKey,
	New: func(base, key string, timeout time.Duration) (llm.Provider, error) {
		return openai.New(openai.Config{BaseURL: base + "/v1", APIKey: key, Timeout: timeout})
	},
	Plain: wiretest.Case{File: "text_response.json", Text: "Hello! How can I help you today?", Model: "o4-mini-2025-04-16",
		Usage: llm.Usage{InputTokens: 2006, OutputTokens: 274, CacheReadTokens: 1920, ReasoningTokens: 256}},
	Stream:   wiretest.Case{File: "text_stream.sse", Text: "Hello there! Ça va?", Model: "gpt-4.1-2025-04-14", Usage: llm.Usage{InputTokens: 19, OutputTokens: 6}},
	ToolCall: wiretest.Case{File: "tool_call_stream.sse", Model: "gpt-4.1-2025-04-14", Usage: llm.Usage{InputTokens: 81, OutputTokens: 20}},
	Parallel: wiretest.Case{File: "parallel_tools.sse", Model: "gpt-4.1-2025-04-14", Usage: llm.Usage{InputTokens: 90, OutputTokens: 55}},
	// Chat Completions servers stream reasoning_content but take none
	// back: nothing is kept.
	Structured: wiretest.Case{File: "structured_response.json", Text: `{"city":"Paris","country":"France","population_millions":2.1}`, Model: "gpt-4.1-2025-04-14", Usage: llm.Usage{InputTokens: 92, OutputTokens: 17}},
	Thinking:   wiretest.Case{File: "reasoning_stream.sse", Text: "Hi!", Model: "deepseek-reasoner", Usage: llm.Usage{InputTokens: 12, OutputTokens: 9, ReasoningTokens: 7}},
	Errors: map[llm.Category]wiretest.Reply{
		llm.RateLimit:      wiretest.JSON(429, `{"error":{"message":"Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`),
		llm.Overloaded:     wiretest.JSON(503, `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`),
		llm.ServerError:    wiretest.JSON(500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`),
		llm.Timeout:        wiretest.JSON(408, `{"error":{"message":"Request timed out.","type":"timeout"}}`),
		llm.Auth:           wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: sk-test-****-key.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`),
		llm.InvalidRequest: wiretest.JSON(400, `{"error":{"message":"Invalid value for 'tool_choice'.","type":"invalid_request_error","param":"tool_choice","code":null}}`),
		llm.ContextLength:  wiretest.JSON(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`),
	},
	MidStream: "midstream_error.sse", MidStreamCategory: llm.ServerError,
	Truncated: "truncated.sse",
	KeyEchoed: func(key string) []wiretest.Reply {
		return []wiretest.Reply{
			wiretest.JSON(401, `{"error":{"message":"Incorrect API key provided: `+key+`","type":"invalid_request_error","code":"invalid_api_key"}}`),
			wiretest.SSE(`data: {"error":{"message":"bad token Bearer ` + key + `","type":"server_error"}}` + "\n\n"),
			wiretest.JSON(200, `{"error":"key `+key+` revoked"}`),
		}
	},
}
