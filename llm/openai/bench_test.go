package openai_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openai"
)

// BenchmarkStream1000Deltas measures the client's cost of one streamed
// reply of 1,000 text deltas from a loopback server: HTTP, event parsing,
// JSON decoding, accumulation and the OnDelta calls.
func BenchmarkStream1000Deltas(b *testing.B) {
	const deltas = 1000
	var body strings.Builder
	for i := range deltas {
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_c1aff3a0b1","choices":[{"index":0,"delta":{"content":"tok%d "},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"qJ2A"}`+"\n\n", i)
	}
	body.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	body.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}` + "\n\n")
	body.WriteString("data: [DONE]\n\n")
	wiretest.BenchStream(b, body.String(), deltas, "gpt-4.1", func(base string) (llm.Provider, error) {
		return openai.New(openai.Config{BaseURL: base, APIKey: "sk-test-not-a-real-key"})
	})
}
