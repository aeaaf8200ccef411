package rowstore

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// BenchmarkSealMessage is the CPU cost of storing and reading back one
// typical message (an assistant reply with a tool call, about 250 bytes
// of JSON), plain (JSON and checksum) and sealed (JSON, AES-256-GCM with
// a random nonce, base64), side by side in one loop: the ns of each per
// message and their ratio, for encoding and for decoding.
func BenchmarkSealMessage(b *testing.B) {
	k, err := storekey.Parse(storekey.Generate())
	if err != nil {
		b.Fatal(err)
	}
	m := message.Message{ID: "0195925c-2f1d-7000-8000-000000000001", CreatedAt: time.Now(), Role: message.RoleAssistant,
		Text:      "Let me read the test output first, then look at the handler.",
		ToolCalls: []message.ToolCall{{ID: "call_1", Name: "run_tests", Arguments: map[string]any{"package": "./pkg/server", "verbose": true, "count": int64(1)}}}}
	keys := [2]*storekey.Key{nil, k}
	var enc, dec [2]time.Duration
	for b.Loop() {
		for i, key := range keys {
			start := time.Now()
			body, err := EncodeMessage(key, &m)
			if err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			sum := int64(body.Sum)
			if err := Verify(0, []byte(body.JSON), &sum); err != nil {
				b.Fatal(err)
			}
			var got message.Message
			if err := DecodeMessage(key, &got, []byte(body.JSON)); err != nil || got.Text != m.Text {
				b.Fatal(err)
			}
			enc[i] += mid.Sub(start)
			dec[i] += time.Since(mid)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(enc[0].Nanoseconds())/n, "plain-enc-ns")
	b.ReportMetric(float64(enc[1].Nanoseconds())/n, "sealed-enc-ns")
	b.ReportMetric(float64(dec[0].Nanoseconds())/n, "plain-dec-ns")
	b.ReportMetric(float64(dec[1].Nanoseconds())/n, "sealed-dec-ns")
	b.ReportMetric(float64(enc[1]+dec[1])/float64(enc[0]+dec[0]), "sealed/plain")
}
