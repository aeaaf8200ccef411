package anthropic_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/llm/internal/wiretest"
)

// BenchmarkStream1000Deltas measures the client's cost of one streamed
// reply of 1,000 text deltas from a loopback server: HTTP, event parsing,
// JSON decoding, accumulation and the OnDelta calls.
func BenchmarkStream1000Deltas(b *testing.B) {
	const deltas = 1000
	var body strings.Builder
	body.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
	body.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range deltas {
		fmt.Fprintf(&body, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tok%d \"}}\n\n", i)
	}
	body.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	body.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1000}}\n\n")
	body.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	wiretest.BenchStream(b, body.String(), deltas, "claude-sonnet-4-5", func(base string) (llm.Provider, error) {
		return anthropic.New(anthropic.Config{BaseURL: base, APIKey: "sk-ant-test-not-a-real-key"})
	})
}
