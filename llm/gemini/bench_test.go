package gemini_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/gemini"
	"github.com/skein-dev/skein/llm/internal/wiretest"
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
	wiretest.BenchStream(b, body.String(), deltas, "gemini-2.5-flash", func(base string) (llm.Provider, error) {
		return gemini.New(gemini.Config{BaseURL: base, APIKey: "AIza-test-not-a-real-key"})
	})
}
