package anthropic

import (
	"testing"

	"github.com/skein-dev/skein/llm/internal/wiretest"
)

func TestWireCache(t *testing.T) {
	p := &Provider{maxTokens: 1024}
	wiretest.CheckWireCache(t, p.encodeRequest)
}
