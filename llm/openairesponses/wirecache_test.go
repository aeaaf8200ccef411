package openairesponses

import (
	"testing"

	"github.com/skein-dev/skein/llm/internal/wiretest"
)

func TestWireCache(t *testing.T) {
	wiretest.CheckWireCache(t, encodeRequest)
}

// BenchmarkRequestBuild: building a request costs the same at 1,000
// messages as at 10 (with the wire cache), one new message a call.
func BenchmarkRequestBuild(b *testing.B) {
	wiretest.BenchRequestBuild(b, encodeRequest)
}
