package openaiwire

import "github.com/skein-dev/skein/llm"

// Usage is a usage object as OpenAI's APIs send it. Chat Completions
// names the counts prompt_tokens and completion_tokens, Responses
// input_tokens and output_tokens; both detail the cached part of the
// input and the reasoning part of the output the same way.
type Usage struct {
	PromptTokens            int     `json:"prompt_tokens"`
	CompletionTokens        int     `json:"completion_tokens"`
	InputTokens             int     `json:"input_tokens"`
	OutputTokens            int     `json:"output_tokens"`
	PromptTokensDetails     details `json:"prompt_tokens_details"`
	InputTokensDetails      details `json:"input_tokens_details"`
	CompletionTokensDetails details `json:"completion_tokens_details"`
	OutputTokensDetails     details `json:"output_tokens_details"`
}

type details struct {
	CachedTokens    int `json:"cached_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
}

// LLM returns the counts as llm.Usage, in whichever naming the server
// used (the Chat Completions one when a server sends both).
func (u *Usage) LLM() llm.Usage {
	return llm.Usage{
		InputTokens:     either(u.PromptTokens, u.InputTokens),
		OutputTokens:    either(u.CompletionTokens, u.OutputTokens),
		CacheReadTokens: either(u.PromptTokensDetails.CachedTokens, u.InputTokensDetails.CachedTokens),
		ReasoningTokens: either(u.CompletionTokensDetails.ReasoningTokens, u.OutputTokensDetails.ReasoningTokens),
	}
}

// either returns a, else b.
func either(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
