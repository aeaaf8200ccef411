package agent

import (
	"context"
	"fmt"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Events of a compaction: "agent:context_compacted" is stored in the log
// (a log written before it was named so says "compaction", read as
// the new name: sessions.EventType); "transcript_compacted" is the
// notification subscribers get with the same fields (not stored).
const (
	EventCompaction          = sessions.EventContextCompacted
	EventTranscriptCompacted = "transcript_compacted"
)

// Compaction triggers.
const (
	TriggerManual        = "manual"         // agent_session_compact
	TriggerThreshold     = "threshold"      // the estimate reached the loop's threshold
	TriggerContextLength = "context_length" // the provider said the context was too long
)

// Defaults of a loop's compaction (agent_loop's compact_threshold and
// tool_output_max_chars).
const (
	DefaultCompactThreshold   = 48000
	DefaultToolOutputMaxChars = 16000
)

// Compaction configures a loop's context management.
type Compaction struct {
	// Enabled turns automatic compaction on ("none" turns it off).
	Enabled bool
	// Options are the compaction engine's options (strategy, keep_last, ...).
	Options compact.Options
	// Threshold is the estimated token count that triggers compaction
	// before a model call, lowered to 65% of the model's context window
	// when the window is known.
	Threshold int
	// ContextBudget > 0 sends only the viewport of that many tokens to
	// the model; the session keeps everything.
	ContextBudget int
	// ToolOutputMaxChars > 0 shortens longer tool results with
	// compact.Microcompact (or Options.Compress, when set) before they
	// are stored.
	ToolOutputMaxChars int
}

// CompactSession runs the compaction engine over a session and, when it
// compacted, replaces the transcript with the result, sets the running
// summary and logs a compaction event. It returns the result and the
// events to deliver: the stored compaction event and the
// transcript_compacted notification. Callbacks in opts run without any
// store lock held.
func CompactSession(ctx context.Context, store *sessions.Store, id string, opts compact.Options, trigger string) (*compact.Result, []sessions.Event, error) {
	var res *compact.Result
	events, err := store.Update(ctx, id, func(v message.View) (*sessions.Change, error) {
		msgs := viewSlice(v)
		var err error
		res, err = compact.Compact(ctx, msgs, opts)
		if err != nil || !res.Compacted {
			return nil, err
		}
		summary := res.Summary
		// kept: the messages after the summary. It can exceed keep_last
		// (the cut never separates a tool call from its results, and
		// prefers to start at a user message); note says so, since the
		// message count alone can then look unchanged.
		kept := len(res.Messages) - min(opts.KeepFirst, len(res.Messages)) - 1
		data := map[string]any{"strategy": res.Strategy, "archived": int64(res.Archived), "trigger": trigger,
			"tokens_before": int64(res.TokensBefore), "tokens_after": int64(res.TokensAfter),
			"messages_before": int64(len(msgs)), "messages_after": int64(len(res.Messages)), "tier2": res.Tier2,
			"kept": int64(kept), "keep_last": int64(opts.KeepLast)}
		if kept > opts.KeepLast {
			data["note"] = fmt.Sprintf("archived %d messages into one summary and kept the last %d, not %d: the cut may not separate a tool call from its results and starts at a user message when it can", res.Archived, kept, opts.KeepLast)
		}
		return &sessions.Change{Replace: true, ReplaceWith: res.Messages, SetSummary: true, Summary: &summary,
			Events: []sessions.Event{sessions.NewEvent(EventCompaction, data)}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, e := range events {
		if e.Type == EventCompaction {
			note := e
			note.Type = EventTranscriptCompacted
			events = append(events, note)
			break
		}
	}
	return res, events, nil
}

func viewSlice(v message.View) []message.Message {
	if t, ok := v.(message.Transcript); ok {
		return t.Slice()
	}
	out := make([]message.Message, v.Len())
	for i := range out {
		out[i] = *v.At(i)
	}
	return out
}

// contextMessages returns the messages of the next model call: it
// compacts the session first when the estimated context reached the
// threshold (or unconditionally when forced, after a context_length
// error), then cuts the viewport when a context budget is set.
func (l *loop) contextMessages(forced bool) ([]message.Message, error) {
	cfg := l.cfg
	msgs, err := cfg.Store.Messages(l.ctx, cfg.SessionID)
	if err != nil {
		return nil, err
	}
	l.callLen = len(msgs)
	c := cfg.Compaction
	if c == nil {
		return msgs, nil
	}
	if c.Enabled && (forced || l.estimate(msgs) >= compact.EffectiveThreshold(c.Threshold, cfg.Request.Model)) {
		trigger := TriggerThreshold
		opts := c.Options
		if forced {
			trigger = TriggerContextLength
			opts.TokenThreshold = 0
		}
		// The compaction writes the session: what the step staged goes
		// first, and its events are delivered before the compaction's.
		if err := l.commit(); err != nil {
			return nil, err
		}
		res, events, err := CompactSession(l.ctx, cfg.Store, cfg.SessionID, opts, trigger)
		if err != nil {
			return nil, err
		}
		if err := l.emit(events...); err != nil {
			return nil, err
		}
		if res.Compacted {
			l.res.Compactions++
			if msgs, err = cfg.Store.Messages(l.ctx, cfg.SessionID); err != nil {
				return nil, err
			}
			l.usage, l.usageAt = compact.EstimateTokens(msgs), len(msgs)
			l.callLen = len(msgs)
		}
	}
	if c.ContextBudget > 0 {
		// the provider's token counts then describe the viewport, not the
		// session: the threshold check estimates the session instead
		l.viewport, l.usageAt = true, 0
		return compact.Viewport(msgs, c.ContextBudget), nil
	}
	return msgs, nil
}

// estimate is the context size of msgs: the provider-reported tokens of
// the last call plus an estimate of the messages added since, or an
// estimate of everything before the first call.
func (l *loop) estimate(msgs []message.Message) int {
	if l.usageAt == 0 || l.usageAt > len(msgs) {
		l.usage, l.usageAt = compact.EstimateTokens(msgs), len(msgs)
		return l.usage
	}
	return l.usage + compact.EstimateTokens(msgs[l.usageAt:])
}

// shortenToolOutput applies the loop's tool output limit.
func (l *loop) shortenToolOutput(name, output string) (string, error) {
	c := l.cfg.Compaction
	if c == nil || c.ToolOutputMaxChars <= 0 || len(output) <= c.ToolOutputMaxChars {
		return output, nil
	}
	if c.Options.Compress != nil {
		return c.Options.Compress(name, output, c.ToolOutputMaxChars)
	}
	return compact.Microcompact(output, c.ToolOutputMaxChars), nil
}
