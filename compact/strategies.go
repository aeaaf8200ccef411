package compact

import (
	"context"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions/message"
)

// summarize runs the named strategy over archived and returns the text of
// the summary message: head (its header line and a newline) followed by
// the summary body. declined is set when a custom Compactor returned
// ErrNoSummary. Errors of the Compactor and the MaskFunc are returned
// unchanged, so a Starlark error keeps its traceback.
func summarize(ctx context.Context, strategy string, archived []message.Message, opts *Options, head string) (text string, declined bool, err error) {
	switch strategy {
	case StrategyTruncate:
		buf := append(make([]byte, 0, len(head)+truncateMaxEntries*(truncateMaxChars+40)), head...)
		return string(truncateSummary(buf, archived)), false, nil
	case StrategyObservationMask:
		var overrides []*string
		if opts.Mask != nil {
			if overrides, err = opts.Mask(archived); err != nil {
				return "", false, err
			}
			if len(overrides) != len(archived) {
				return "", false, fmt.Errorf("mask_callback: got %d entries for %d messages, want one per message", len(overrides), len(archived))
			}
		}
		buf := append(make([]byte, 0, len(head)+maskSize(archived)), head...)
		return string(maskSummary(buf, archived, overrides)), false, nil
	case StrategyLLM:
		shortened, err := shortenToolOutputs(archived, opts)
		if err != nil {
			return "", false, err
		}
		body, err := llmSummary(ctx, shortened, opts)
		return head + body, false, err
	case StrategyCustom:
		shortened, err := shortenToolOutputs(archived, opts)
		if err != nil {
			return "", false, err
		}
		body, err := opts.Custom.Compact(ctx, shortened)
		if errors.Is(err, ErrNoSummary) {
			return "", true, nil
		}
		return head + body, false, err
	}
	return "", false, fmt.Errorf("unknown strategy '%s'", strategy) // Options.Validate prevents this
}

// shortenToolOutputs returns archived with every tool result whose string
// content is longer than opts.ToolOutputMaxChars shortened by
// opts.Compress, else Microcompact. It returns archived itself when the
// limit is 0 or nothing needs shortening, else a copy (archived is never
// modified). An error of Compress is returned unchanged.
func shortenToolOutputs(archived []message.Message, opts *Options) ([]message.Message, error) {
	maxChars := opts.ToolOutputMaxChars
	if maxChars <= 0 {
		return archived, nil
	}
	var out []message.Message
	for i := range archived {
		m := &archived[i]
		if m.Role != message.RoleTool || m.Blocks != nil || len(m.Text) <= maxChars {
			continue
		}
		if out == nil {
			out = append([]message.Message(nil), archived...)
		}
		if opts.Compress == nil {
			out[i].Text = Microcompact(m.Text, maxChars)
			continue
		}
		text, err := opts.Compress(m.Name, m.Text, maxChars)
		if err != nil {
			return nil, err
		}
		out[i].Text = text
	}
	if out == nil {
		return archived, nil
	}
	return out, nil
}
