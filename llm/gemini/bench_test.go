package gemini_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/sessions"
)

// BenchmarkStream1000Deltas measures the client's cost of one streamed
// reply of 1,000 text deltas from a loopback server: HTTP, event parsing,
// JSON decoding, joining the text parts and the OnDelta calls.
func BenchmarkStream1000Deltas(b *testing.B) {
	const deltas = 1000
	var body strings.Builder
	for i := range deltas {
		finish := ""
		if i == deltas-1 {
			finish = `,"finishReason":"STOP"`
		}
		fmt.Fprintf(&body, `data: {"candidates":[{"content":{"parts":[{"text":"tok%d "}],"role":"model"}%s,"index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"gemini-2.5-flash","responseId":"nDbdaKz3IvnCjMcPqdT_oQo"}`+"\r\n\r\n", i, finish, i+1, i+11)
	}
	stream := body.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, APIKey: "AIza-test-not-a-real-key"})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	req := &llm.Request{Model: "gemini-2.5-flash", Messages: []sessions.Message{{Role: sessions.RoleUser, Text: "count"}}, Stream: true,
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
