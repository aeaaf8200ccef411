package openaiwire

import (
	"encoding/json"
	"testing"

	"github.com/skein-dev/skein/llm"
)

// TestUsage reads both namings, and a gateway's object carrying both
// without counting twice.
func TestUsage(t *testing.T) {
	want := llm.Usage{InputTokens: 100, OutputTokens: 40, CacheReadTokens: 64, ReasoningTokens: 32}
	for _, body := range []string{
		`{"prompt_tokens":100,"completion_tokens":40,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":32}}`,
		`{"input_tokens":100,"output_tokens":40,"total_tokens":140,"input_tokens_details":{"cached_tokens":64},"output_tokens_details":{"reasoning_tokens":32}}`,
		`{"prompt_tokens":100,"completion_tokens":40,"input_tokens":100,"output_tokens":40,"prompt_tokens_details":{"cached_tokens":64},"input_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":32}}`,
	} {
		var u Usage
		if err := json.Unmarshal([]byte(body), &u); err != nil {
			t.Fatal(err)
		}
		if got := u.LLM(); got != want {
			t.Errorf("%s: got %+v, want %+v", body, got, want)
		}
	}
}
