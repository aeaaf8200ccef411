package openairesponses_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openairesponses"
	"github.com/skein-dev/skein/sessions"
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
	stream := body.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	p, err := openairesponses.New(openairesponses.Config{BaseURL: srv.URL, APIKey: "sk-test-not-a-real-key"})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	req := &llm.Request{Model: "gpt-4.1", Messages: []sessions.Message{{Role: sessions.RoleUser, Text: "count"}}, Stream: true,
		OnDelta: func(llm.Delta) { n++ }}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.OutputTokens != deltas || len(resp.Text) < deltas {
			b.Fatalf("usage %+v", resp.Usage)
		}
	}
	if n != deltas*b.N {
		b.Fatalf("%d deltas for %d replies", n, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*deltas), "µs/delta")
}
