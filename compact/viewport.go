package compact

import (
	"fmt"
	"strings"

	"github.com/skein-dev/skein/sessions/message"
)

// ViewportStrategy is the strategy named in the header of the summary
// message Viewport puts first.
const ViewportStrategy = "viewport"

// Viewport returns what fits a token budget of msgs (a valid transcript),
// leaving msgs unchanged: the newest messages whose EstimateTokens fits in
// budget, taken in whole units, newest first, stopping at the first unit
// that does not fit. A unit is an assistant message that calls tools
// together with all its results, or any other single message, so the
// window never starts on a tool result and never splits a tool pair.
//
// When messages left out of the window hold a running summary (summary
// messages, see RunningSummary), the window is preceded by
// SummaryMessage(N, ViewportStrategy, RunningSummary(left out)), N counting
// the messages left out (a summary message among them counts as the N of
// its header). Room for it is reserved first, but the newest messages win:
// when not even the newest unit fits beside it, it is left out and the
// window uses the whole budget. With nothing that fits, the result is
// empty.
//
// Without a summary message first, the window starts at a user or system
// message when it holds one, leaving out older assistant turns before it
// (Anthropic requires a conversation to start with a user message).
//
// Without a summary message first the result shares msgs' storage
// (clipped, so appending to it copies); callers must not modify it.
func Viewport(msgs []message.Message, budget int) []message.Message {
	full := turnStart(msgs, window(msgs, budget))
	sums := indexSummaries(msgs)
	if len(sums) == 0 || sums[0].pos >= full {
		return msgs[full:len(msgs):len(msgs)] // no summary left out
	}
	// Reserve for the largest summary message the window could need: every
	// summary body and the count of every message.
	reserve := EstimateMessage(&message.Message{Role: message.RoleUser,
		Text: header(sums.standsFor(len(msgs)), ViewportStrategy) + "\n" + sums.running(len(msgs))})
	if reserve > budget {
		return msgs[full:len(msgs):len(msgs)]
	}
	start := window(msgs, budget-reserve)
	if start == len(msgs) && full < len(msgs) {
		return msgs[full:len(msgs):len(msgs)]
	}
	out := make([]message.Message, 0, 1+len(msgs)-start)
	out = append(out, SummaryMessage(sums.standsFor(start), ViewportStrategy, sums.running(start)))
	return append(out, msgs[start:]...)
}

// PinnedViewport is Viewport with the first keepFirst messages of msgs
// pinned before the sliding window (a goal or system prompt that must stay
// in view). The pinned prefix is extended over the tool results that
// follow it, so it never ends inside a tool pair; it counts against
// budget, and the window (Viewport of the messages after it) gets what is
// left; when all the messages after the prefix fit, they follow it
// unchanged (no gap, so the window need not start at a user message).
// A keepFirst of 0 is Viewport; one at or beyond len(msgs) pins
// them all. When the pinned prefix alone needs more than budget it is an
// error (a *PinnedError): the prefix is never cut and never sent over
// budget.
func PinnedViewport(msgs []message.Message, keepFirst, budget int) ([]message.Message, error) {
	if keepFirst < 0 {
		return nil, fmt.Errorf("'keep_first' must be >= 0")
	}
	if keepFirst == 0 {
		return Viewport(msgs, budget), nil
	}
	lo := min(keepFirst, len(msgs))
	for lo < len(msgs) && msgs[lo].Role == message.RoleTool {
		lo++
	}
	cost := EstimateTokens(msgs[:lo])
	if cost > budget {
		return nil, &PinnedError{Pinned: lo, Tokens: cost, Budget: budget}
	}
	rest := msgs[lo:]
	if window(rest, budget-cost) > 0 {
		// a gap after the prefix: the window is a viewport of its own
		rest = Viewport(rest, budget-cost)
	}
	out := make([]message.Message, 0, lo+len(rest))
	return append(append(out, msgs[:lo]...), rest...), nil
}

// PinnedError reports a pinned prefix (PinnedViewport) that does not fit
// its budget.
type PinnedError struct {
	Pinned int // messages pinned (keep_first, extended over tool results)
	Tokens int // their estimate
	Budget int
}

func (e *PinnedError) Error() string {
	return fmt.Sprintf("the %d pinned messages ('keep_first') need about %d tokens, more than the budget of %d", e.Pinned, e.Tokens, e.Budget)
}

// summaryIndex lists the summary messages of a transcript, in order.
type summaryIndex []struct {
	pos  int
	info SummaryInfo
}

func indexSummaries(msgs []message.Message) summaryIndex {
	var idx summaryIndex
	for i := range msgs {
		if s, ok := ParseSummary(&msgs[i]); ok {
			idx = append(idx, struct {
				pos  int
				info SummaryInfo
			}{i, s})
		}
	}
	return idx
}

// standsFor is standsFor(msgs[:n]).
func (idx summaryIndex) standsFor(n int) int {
	total := n
	for _, s := range idx {
		if s.pos < n {
			total += s.info.Count - 1
		}
	}
	return total
}

// running is RunningSummary(msgs[:n]).
func (idx summaryIndex) running(n int) string {
	var bodies []string
	for _, s := range idx {
		if s.pos < n {
			bodies = append(bodies, s.info.Body)
		}
	}
	return strings.Join(bodies, "\n\n")
}

// turnStart moves start forward past assistant messages (and their tool
// results) to the first user or system message of msgs[start:], when
// there is one.
func turnStart(msgs []message.Message, start int) int {
	for i := start; i < len(msgs); i++ {
		if r := msgs[i].Role; r == message.RoleUser || r == message.RoleSystem {
			return i
		}
	}
	return start
}

// window returns the start of the newest whole units of msgs whose
// estimate fits in budget.
func window(msgs []message.Message, budget int) int {
	start, used := len(msgs), 0
	for start > 0 {
		u := start - 1
		for u > 0 && msgs[u].Role == message.RoleTool {
			u--
		}
		if msgs[u].Role == message.RoleTool || (u < start-1 && !msgs[u].HasToolCalls()) {
			return start // tool results without their call: invalid input, stop here
		}
		cost := EstimateTokens(msgs[u:start])
		if used+cost > budget {
			return start
		}
		used += cost
		start = u
	}
	return start
}
