package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/sessions"
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
	stream := body.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-test-not-a-real-key"})
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
		if resp.Usage.OutputTokens != deltas {
			b.Fatalf("usage %+v", resp.Usage)
		}
	}
	if n != deltas*b.N {
		b.Fatalf("%d deltas for %d replies", n, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*deltas), "µs/delta")
}
