package openai

import (
	"testing"

	"github.com/skein-dev/skein/llm/internal/wiretest"
)

func TestWireCache(t *testing.T) {
	for _, name := range []string{NameOpenAI, "vllm"} {
		p := &Provider{name: name}
		wiretest.CheckWireCache(t, p.encodeRequest)
	}
}

// BenchmarkRequestBuild: building a request costs the same at 1,000
// messages as at 10 (with the wire cache), one new message a call.
func BenchmarkRequestBuild(b *testing.B) {
	wiretest.BenchRequestBuild(b, (&Provider{name: NameOpenAI}).encodeRequest)
}
