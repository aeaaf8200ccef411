package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/sessions"
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
	stream := body.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-test-not-a-real-key"})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	req := &llm.Request{Model: "claude-sonnet-4-5", Messages: []sessions.Message{{Role: sessions.RoleUser, Text: "count"}}, Stream: true,
		OnDelta: func(llm.Delta) { n++ }}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.OutputTokens != deltas {
			b.Fatalf("usage %+v", resp.Usage)
		}
	}
	if n != deltas*b.N {
		b.Fatalf("%d deltas for %d replies", n, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*deltas), "µs/delta")
}
