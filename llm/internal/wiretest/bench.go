package wiretest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// BenchStream measures a client's cost of one streamed reply of n text
// deltas from a loopback server: HTTP, event parsing, JSON decoding,
// accumulation and the OnDelta calls. stream is the reply in the
// protocol's format, whose usage counts n output tokens; newClient makes
// the client of the server at base. It reports µs per delta (allocations
// per delta are allocs/op divided by n).
func BenchStream(b *testing.B, stream string, n int, model string, newClient func(base string) (llm.Provider, error)) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	p, err := newClient(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	deltas := 0
	req := &llm.Request{Model: model, Messages: []message.Message{{Role: message.RoleUser, Text: "count"}}, Stream: true,
		OnDelta: func(llm.Delta) { deltas++ }}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Complete(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.OutputTokens != n || len(resp.Text) < n {
			b.Fatalf("usage %+v, %d bytes of text", resp.Usage, len(resp.Text))
		}
	}
	if deltas != n*b.N {
		b.Fatalf("%d deltas for %d replies", deltas, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/delta")
}
