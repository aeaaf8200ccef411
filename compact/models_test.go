package compact

import "testing"

func TestContextWindow(t *testing.T) {
	for _, tt := range []struct {
		model  string
		tokens int
	}{
		{"claude-sonnet-4-5", 200_000},
		{"claude-3-5-haiku-latest", 200_000},
		{"gpt-4o", 128_000},
		{"gpt-4o-mini", 128_000},
		{"gpt-4.1-mini", 1_047_576},
		{"gpt-4", 8_192},
		{"gpt-5-mini", 400_000},
		{"o3-mini", 200_000},
		{"o4-mini", 200_000},
		{"o1-mini", 128_000},
		{"llama3", 8_192},
		{"llama3.1:8b", 131_072},
		{"qwen2.5-coder:7b", 32_768},
		{"qwen3:8b", 40_960},
		{"openai/GPT-4o", 128_000},
		{"anthropic/claude-opus-4", 200_000},
		{"unknown-model", 0},
		{"", 0},
	} {
		got, ok := ContextWindow(tt.model)
		if got != tt.tokens || ok != (tt.tokens > 0) {
			t.Errorf("ContextWindow(%q) = %d, %v; want %d", tt.model, got, ok, tt.tokens)
		}
	}
}

func TestEffectiveThreshold(t *testing.T) {
	for _, tt := range []struct {
		threshold int
		model     string
		want      int
	}{
		{48_000, "claude-sonnet-4-5", 48_000},
		{48_000, "gpt-4", 5_324},
		{48_000, "llama3", 5_324},
		{200_000, "gpt-4o", 83_200},
		{48_000, "unknown", 48_000},
		{0, "gpt-4", 0},
	} {
		if got := EffectiveThreshold(tt.threshold, tt.model); got != tt.want {
			t.Errorf("EffectiveThreshold(%d, %q) = %d, want %d", tt.threshold, tt.model, got, tt.want)
		}
	}
}
