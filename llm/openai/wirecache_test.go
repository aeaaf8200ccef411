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
