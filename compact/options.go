package compact

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// Strategy names, as scripts write them.
const (
	StrategyCustom          = "custom"
	StrategyLLM             = "llm"
	StrategyObservationMask = "observation_mask"
	StrategyTruncate        = "truncate"
)

// Strategies lists every strategy name in sorted order (for error messages).
var Strategies = []string{StrategyCustom, StrategyLLM, StrategyObservationMask, StrategyTruncate}

// Options configures Compact. Start from DefaultOptions: the zero value keeps
// no messages at all (KeepLast 0). The names in parentheses are the keys of
// the Starlark options dict.
type Options struct {
	// KeepFirst (keep_first) is how many messages at the start are kept
	// verbatim (for example a pinned system message). Default 0.
	KeepFirst int
	// KeepLast (keep_last) is how many messages at the end are kept
	// verbatim; the split rule may keep more (see the package doc).
	// Default 12.
	KeepLast int
	// TokenThreshold (token_threshold): when > 0, Compact does nothing while
	// the estimate of the whole transcript is below it. 0 compacts
	// unconditionally.
	TokenThreshold int
	// Strategy (compact_strategy) is the tier-1 strategy, one of Strategies.
	// "" means StrategyObservationMask.
	Strategy string
	// HardLimitTokens (hard_limit_tokens): when > 0 and the estimate after
	// tier 1 is above it, tier 2 runs (see the package doc). 0: no tier 2.
	HardLimitTokens int
	// HardLimitStrategy (hard_limit_strategy) is the tier-2 strategy. ""
	// means StrategyTruncate.
	HardLimitStrategy string
	// ToolOutputMaxChars (tool_output_max_chars): when > 0, archived tool
	// results longer than this are shortened with Microcompact before the
	// llm and custom strategies see them (truncate and observation_mask
	// shorten far more on their own). The agent loop uses the same value
	// for new tool results. 0: off.
	ToolOutputMaxChars int
	// Custom (custom_compactor) produces the summary for StrategyCustom.
	Custom Compactor
	// Mask (mask_callback) overrides observation masking per message.
	Mask MaskFunc
	// Compress (compress_callback) replaces Microcompact where
	// ToolOutputMaxChars shortens a tool result: it gets the tool's name,
	// the output and the limit, and returns the shortened text. Its error
	// is returned unchanged.
	Compress CompressFunc
	// SummarizePrompt (summarize_prompt) replaces DefaultSummarizePrompt as
	// the system prompt of the llm strategy's model call.
	SummarizePrompt string
	// Provider and Model (provider, model) make the llm strategy's call.
	// Model "" leaves the choice to the provider.
	Provider llm.Provider
	Model    string
}

// DefaultOptions returns the defaults: KeepFirst 0, KeepLast
// 12, no token threshold, observation_mask, no hard limit, truncate as the
// hard-limit strategy.
func DefaultOptions() Options {
	return Options{
		KeepLast:          12,
		Strategy:          StrategyObservationMask,
		HardLimitStrategy: StrategyTruncate,
	}
}

// Compactor produces the summary of archived messages for the custom
// strategy. The Starlark custom_compactor callback is adapted to it.
//
// archived must not be modified. To decline (the callback returned None),
// return ErrNoSummary: Compact then leaves the transcript unchanged (for
// tier 1) or keeps the tier-1 result (for tier 2), without an error. An
// empty summary is a summary: the archived messages are replaced by a
// summary message with an empty body.
type Compactor interface {
	Compact(ctx context.Context, archived []message.Message) (summary string, err error)
}

// CompactorFunc adapts a function to Compactor.
type CompactorFunc func(ctx context.Context, archived []message.Message) (string, error)

// Compact calls f.
func (f CompactorFunc) Compact(ctx context.Context, archived []message.Message) (string, error) {
	return f(ctx, archived)
}

// CompressFunc shortens one tool output (tool is the tool's name) to
// about maxChars; Microcompact is the default.
type CompressFunc func(tool, output string, maxChars int) (string, error)

// ErrNoSummary is returned by a Compactor that declines to summarise.
var ErrNoSummary = errors.New("no summary")

// MaskFunc overrides observation masking per archived message. It returns
// one entry per message of archived (which it must not modify): nil keeps
// the default masking of that message, a string replaces the message's
// masked text (the entry still starts with the message's label, see the
// package doc). Any other length is an error.
type MaskFunc func(archived []message.Message) ([]*string, error)

// Validate checks the options: non-negative counts, known strategy names,
// and what the chosen strategies need (a Compactor for custom, a Provider
// for llm). Its messages name the options by their Starlark keys.
func (o *Options) Validate() error {
	for _, c := range []struct {
		name string
		v    int
	}{
		{"keep_first", o.KeepFirst},
		{"keep_last", o.KeepLast},
		{"token_threshold", o.TokenThreshold},
		{"hard_limit_tokens", o.HardLimitTokens},
		{"tool_output_max_chars", o.ToolOutputMaxChars},
	} {
		if c.v < 0 {
			return fmt.Errorf("'%s' must be >= 0", c.name)
		}
	}
	if err := o.checkStrategy("compact_strategy", o.strategy(), true); err != nil {
		return err
	}
	return o.checkStrategy("hard_limit_strategy", o.hardLimitStrategy(), o.HardLimitTokens > 0)
}

// checkStrategy checks that name is a strategy and, when used is set, that
// the options hold what it needs.
func (o *Options) checkStrategy(key, name string, used bool) error {
	switch name {
	case StrategyCustom:
		if used && o.Custom == nil {
			return fmt.Errorf("%s 'custom' needs a custom_compactor", key)
		}
	case StrategyLLM:
		if used && o.Provider == nil {
			return fmt.Errorf("%s 'llm' needs a provider", key)
		}
	case StrategyObservationMask, StrategyTruncate:
	default:
		return fmt.Errorf("unknown %s '%s' (expected one of: %s)", key, name, strings.Join(Strategies, ", "))
	}
	return nil
}

func (o *Options) strategy() string {
	if o.Strategy == "" {
		return StrategyObservationMask
	}
	return o.Strategy
}

func (o *Options) hardLimitStrategy() string {
	if o.HardLimitStrategy == "" {
		return StrategyTruncate
	}
	return o.HardLimitStrategy
}
