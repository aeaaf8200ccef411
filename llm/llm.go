// Package llm is skein's provider-neutral model of a language-model call:
// a Request (system prompt, messages, tools, sampling options), a Response
// (text, tool calls, thinking, usage, stop reason), the Provider interface
// every backend implements, error categories, and the retry and fallback
// policies wrapped around providers.
//
// Providers live in sub-packages, one per wire protocol: llm/mock
// (deterministic, for tests and CI), llm/openai (OpenAI Chat Completions,
// Azure OpenAI and every compatible server), llm/openairesponses (OpenAI
// Responses), llm/anthropic (Anthropic Messages) and llm/gemini (Google
// Gemini). Presets names the providers each is reached through.
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skein-dev/skein/sessions/message"
)

// ToolSpec describes one tool offered to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (a JSON value).
	Parameters map[string]any
}

// Request is one model call.
type Request struct {
	Model    string
	System   string
	Messages []message.Message // must not be modified by providers
	Tools    []ToolSpec
	// ToolChoice is "" (provider default), "auto", "none", "required", or
	// the name of one tool the model must call.
	ToolChoice  string
	Temperature *float64
	MaxTokens   int // 0: the provider's default
	Stop        []string
	// Stream asks a provider that can stream to do so; OnDelta, if set,
	// receives the deltas as they arrive. A provider that cannot stream
	// ignores Stream.
	Stream  bool
	OnDelta func(Delta)
	// Thinking, if set, asks the model to reason before it answers.
	Thinking *Thinking
	// Output, if set, asks for a reply that is a JSON value matching a
	// schema, in the provider's native form (see Output).
	Output *Output
	// NoCache turns off prompt-cache breakpoints (the `cache` option
	// "none"); by default providers that need them marked (Anthropic) get
	// them on the system prompt, the tools and the last message.
	NoCache bool
	// Cache, if set, keeps the wire forms of the messages between the
	// calls of one conversation, so that a provider encodes only the new
	// ones (see WireCache). It never changes what is sent.
	Cache *WireCache
}

// Thinking levels for Thinking.Effort.
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

// Thinking asks a model to reason before it answers. Providers take
// whichever of the two fields their API has and derive the other: a
// budget maps to an effort (under 4096 tokens low, under 16384 medium,
// else high), an effort to a budget (EffortBudget).
type Thinking struct {
	BudgetTokens int    // reasoning tokens allowed (Anthropic, Gemini); 0: not set
	Effort       string // EffortLow, EffortMedium or EffortHigh (OpenAI); "": not set
}

// EffortBudget is the budget an effort stands for: low 2048, medium 8192,
// high 24576 tokens.
func EffortBudget(effort string) int {
	switch effort {
	case EffortLow:
		return 2048
	case EffortHigh:
		return 24576
	}
	return 8192
}

// Budget returns the thinking budget in tokens: BudgetTokens, else the
// budget of Effort.
func (t *Thinking) Budget() int {
	if t.BudgetTokens > 0 {
		return t.BudgetTokens
	}
	return EffortBudget(t.Effort)
}

// Level returns the thinking effort: Effort, else the effort a budget
// stands for.
func (t *Thinking) Level() string {
	switch {
	case t.Effort != "":
		return t.Effort
	case t.BudgetTokens <= 0:
		return EffortMedium
	case t.BudgetTokens < 4096:
		return EffortLow
	case t.BudgetTokens < 16384:
		return EffortMedium
	}
	return EffortHigh
}

// Delta is one streamed piece of a reply.
type Delta struct {
	Text     string // a piece of visible text
	Thinking string // a piece of thinking text
}

// Usage counts the tokens of one call. InputTokens counts every token of
// the prompt, those read from or written to a prompt cache included;
// OutputTokens counts every generated token, reasoning included (both as
// OpenAI counts them). CacheReadTokens and CacheWriteTokens are the parts
// of InputTokens read from and written to the cache, ReasoningTokens the
// part of OutputTokens spent reasoning.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
	ReasoningTokens  int
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// Map returns the usage as a JSON object with snake_case keys; zero cache
// and reasoning counts are left out.
func (u Usage) Map() map[string]any {
	m := make(map[string]any, 5)
	u.Put(m)
	return m
}

// Put sets Map's keys in m.
func (u Usage) Put(m map[string]any) {
	m["input_tokens"], m["output_tokens"] = int64(u.InputTokens), int64(u.OutputTokens)
	if u.CacheReadTokens > 0 {
		m["cache_read_tokens"] = int64(u.CacheReadTokens)
	}
	if u.CacheWriteTokens > 0 {
		m["cache_write_tokens"] = int64(u.CacheWriteTokens)
	}
	if u.ReasoningTokens > 0 {
		m["reasoning_tokens"] = int64(u.ReasoningTokens)
	}
}

// Stop reasons.
const (
	StopEnd       = "end_turn"      // the model finished its reply
	StopToolUse   = "tool_use"      // the model called tools
	StopMaxTokens = "max_tokens"    // the reply was cut at the token limit
	StopSequence  = "stop_sequence" // a stop sequence was produced
)

// Response is the result of one model call.
type Response struct {
	Text string
	// Thinking holds thinking blocks (with their signatures) to be sent
	// back unchanged on the next request.
	Thinking   []message.Block
	ToolCalls  []message.ToolCall
	Usage      Usage
	StopReason string
	Model      string // the model that answered
	Provider   string // the provider that answered (set by Fallback)
}

// Provider is a model backend.
type Provider interface {
	// Name is the provider's name as scripts write it ("mock", "openai", ...).
	Name() string
	// Complete performs one call. It must honour ctx cancellation, and
	// return *Error for failures it can categorise.
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Category classifies a failed call.
type Category string

// Error categories. The first five are transient (worth a retry).
const (
	RateLimit      Category = "rate_limit"
	Overloaded     Category = "overloaded"
	ServerError    Category = "server_error"
	Timeout        Category = "timeout"
	Network        Category = "network"
	Auth           Category = "auth"
	InvalidRequest Category = "invalid_request"
	ContextLength  Category = "context_length"
)

// Categories lists every category in sorted order.
var Categories = []Category{Auth, ContextLength, InvalidRequest, Network, Overloaded, RateLimit, ServerError, Timeout}

// Transient reports whether a call failing with c may succeed if retried.
func (c Category) Transient() bool {
	switch c {
	case RateLimit, Overloaded, ServerError, Timeout, Network:
		return true
	}
	return false
}

// Valid reports whether c is a known category.
func (c Category) Valid() bool {
	for _, x := range Categories {
		if c == x {
			return true
		}
	}
	return false
}

// Error is a categorised provider failure. Its message must never contain
// an API key.
type Error struct {
	Provider string
	Category Category
	Message  string
	Status   int // HTTP status, 0 if none
	// RetryAfter is the provider's requested delay before a retry (0: none).
	RetryAfter time.Duration
	// NoRetry is set when the provider said not to retry (x-should-retry:
	// false) even though the category is transient.
	NoRetry bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Provider, e.Category, e.Message)
}

// Retryable reports whether the call should be retried.
func (e *Error) Retryable() bool { return e.Category.Transient() && !e.NoRetry }

// AsError returns err as *Error when it is one (or wraps one).
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
