package compact

import "strings"

// contextWindows maps model-name prefixes to context windows in tokens.
// The longest matching prefix wins.
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"claude-", 200_000},
	{"gpt-5", 400_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-4o", 128_000},
	{"chatgpt-4o", 128_000},
	{"gpt-4.5", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-3.5-turbo", 16_385},
	{"o1", 200_000},
	{"o1-mini", 128_000},
	{"o3", 200_000},
	{"o4-mini", 200_000},
	{"llama3", 8_192},
	{"llama3.1", 131_072},
	{"llama3.2", 131_072},
	{"llama3.3", 131_072},
	{"llama-3", 8_192},
	{"llama-3.1", 131_072},
	{"llama-3.2", 131_072},
	{"llama-3.3", 131_072},
	{"qwen", 32_768},
	{"qwen3", 40_960},
	{"mistral", 32_768},
}

// ContextWindow returns the context window, in tokens, of a known model:
// claude-*, gpt-5*, gpt-4.1*, gpt-4.5*, gpt-4o*, gpt-4-turbo, gpt-4, gpt-3.5-turbo,
// o1, o3, o4-mini, llama3*, qwen*, mistral*. Matching ignores case and
// anything up to the last '/' ("openai/gpt-4o"), and the longest matching
// prefix wins, so "gpt-4o-mini" is a gpt-4o and "llama3.1:8b" a llama3.1.
func ContextWindow(model string) (tokens int, ok bool) {
	model = strings.ToLower(model[strings.LastIndexByte(model, '/')+1:])
	best := -1
	for _, w := range contextWindows {
		if strings.HasPrefix(model, w.prefix) && len(w.prefix) > best {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens, best >= 0
}

// thresholdPercent is the share of a model's context window, in percent,
// that EffectiveThreshold lowers a compaction threshold to.
const thresholdPercent = 65

// EffectiveThreshold returns threshold lowered to 65% of the model's
// context window when the window is known and smaller: min(threshold,
// window*65/100). An unknown model leaves threshold unchanged.
func EffectiveThreshold(threshold int, model string) int {
	if w, ok := ContextWindow(model); ok {
		return min(threshold, w*thresholdPercent/100)
	}
	return threshold
}
