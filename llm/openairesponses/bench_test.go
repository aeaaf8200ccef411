package openairesponses_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wiretest"
	"github.com/skein-dev/skein/llm/openairesponses"
)

// BenchmarkStream1000Deltas measures the client's cost of one streamed
// reply of 1,000 output_text deltas from a loopback server: HTTP, event
// parsing, JSON decoding, accumulation and the OnDelta calls.
func BenchmarkStream1000Deltas(b *testing.B) {
	const deltas = 1000
	var body strings.Builder
	body.WriteString(`event: response.output_item.added` + "\n" + `data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_bench","type":"message","status":"in_progress","content":[],"role":"assistant"}}` + "\n\n")
	for i := range deltas {
		fmt.Fprintf(&body, "event: response.output_text.delta\n"+`data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"tok%d ","logprobs":[],"obfuscation":"qJ2A"}`+"\n\n", i+2, i)
	}
	body.WriteString(`event: response.completed` + "\n" + `data: {"type":"response.completed","sequence_number":1002,"response":{"id":"resp_bench","object":"response","status":"completed","model":"gpt-4.1-2025-04-14","output":[],"usage":{"input_tokens":10,"output_tokens":1000,"total_tokens":1010}}}` + "\n\n")
	wiretest.BenchStream(b, body.String(), deltas, "gpt-4.1", func(base string) (llm.Provider, error) {
		return openairesponses.New(openairesponses.Config{BaseURL: base, APIKey: "sk-test-not-a-real-key"})
	})
}
