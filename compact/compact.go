package compact

import (
	"context"
	"reflect"
	"strings"

	"github.com/skein-dev/skein/sessions/message"
)

// Result is the outcome of Compact.
type Result struct {
	// Messages is the new message list: the kept prefix, the summary
	// message, the kept suffix. When Compacted is false it is the input
	// slice itself.
	Messages []message.Message
	// Summary is RunningSummary(Messages): normally the body of the
	// summary message Compact wrote (see the package doc).
	Summary string
	// Archived counts the input messages the summary message replaced
	// (an earlier summary message among them counts as one).
	Archived int
	// Strategy names the strategy that wrote the summary message: the
	// hard-limit strategy when Tier2 is set. "" when Compacted is false.
	Strategy string
	// TokensBefore and TokensAfter are EstimateTokens of the input and of
	// Messages.
	TokensBefore, TokensAfter int
	// Compacted reports whether Messages differs from the input.
	Compacted bool
	// Tier2 reports whether the hard-limit tier ran.
	Tier2 bool
}

// Compact runs the compaction engine over msgs, a valid transcript (as the
// session store keeps them), and returns the new view; msgs itself is never
// modified. See the package doc for the split rule, the strategies, the
// summary message, the running summary and tier 2.
//
// Nothing is compacted (Compacted false, Messages is msgs) when the
// estimate is below opts.TokenThreshold, when the split rule finds nothing
// to archive, when the only message tier 1 would archive is an earlier
// summary message, when a custom Compactor declines with ErrNoSummary, or
// when tier 2 would only replace a summary message by an identical one.
//
// Errors: invalid options (see Options.Validate), ctx's error, a failed or
// empty llm summary, a MaskFunc returning the wrong number of entries, and
// the errors of a Compactor or MaskFunc, returned unchanged.
func Compact(ctx context.Context, msgs []message.Message, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before := EstimateTokens(msgs)
	res := &Result{Messages: msgs, TokensBefore: before, TokensAfter: before}
	if opts.TokenThreshold > 0 && before < opts.TokenThreshold {
		res.Summary = RunningSummary(msgs)
		return res, nil
	}
	// tier compacts res.Messages once more; it reports whether it did.
	tier := func(strategy string, preferUser, skipLoneSummary bool) (bool, error) {
		lo, cut, ok := split(res.Messages, opts.KeepFirst, opts.KeepLast, preferUser)
		if !ok {
			return false, nil
		}
		archived := res.Messages[lo:cut:cut]
		if skipLoneSummary && len(archived) == 1 {
			if _, ok := ParseSummary(&archived[0]); ok {
				return false, nil
			}
		}
		head := header(standsFor(archived), strategy) + "\n"
		text, declined, err := summarize(ctx, strategy, archived, &opts, head)
		if err != nil || declined {
			return false, err
		}
		summary := summaryMessage(text)
		if len(archived) == 1 && reflect.DeepEqual(archived[0], summary) {
			return false, nil // re-summarising a summary changed nothing
		}
		out := make([]message.Message, 0, lo+1+len(res.Messages)-cut)
		out = append(out, res.Messages[:lo]...)
		out = append(out, summary)
		out = append(out, res.Messages[cut:]...)
		res.Messages = out
		res.Strategy = strategy
		res.TokensAfter = EstimateTokens(out)
		return true, nil
	}
	done, err := tier(opts.strategy(), true, true)
	if err != nil {
		return nil, err
	}
	if opts.HardLimitTokens > 0 && res.TokensAfter > opts.HardLimitTokens {
		if res.Tier2, err = tier(opts.hardLimitStrategy(), false, false); err != nil {
			return nil, err
		}
	}
	res.Compacted = done || res.Tier2
	if res.Compacted {
		res.Archived = len(msgs) - len(res.Messages) + 1
	}
	res.Summary = RunningSummary(res.Messages)
	return res, nil
}

// RunningSummary returns the running summary of msgs: the bodies of its
// summary messages (see ParseSummary), in order, separated by blank lines;
// "" when it has none. After a compaction that is the new summary's body,
// preceded by any earlier summary still kept in the prefix.
func RunningSummary(msgs []message.Message) string {
	var bodies []string
	for i := range msgs {
		if s, ok := ParseSummary(&msgs[i]); ok {
			bodies = append(bodies, s.Body)
		}
	}
	return strings.Join(bodies, "\n\n")
}
