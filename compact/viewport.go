package compact

import "github.com/skein-dev/skein/sessions"

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
// When summary is non-nil and the window does not already hold the summary
// message carrying it, the window is preceded by
// SummaryMessage(N, ViewportStrategy, *summary), N counting the messages
// left out (an earlier summary message among them counts as the N of its
// header). The summary is reserved first, so the window gets the budget
// minus its estimate; but the newest messages win: when not even the
// newest unit fits beside the summary, the summary is left out and the
// window uses the whole budget. With nothing that fits, the result is
// empty.
//
// Without a summary message first the result shares msgs' storage
// (clipped, so appending to it copies); callers must not modify it.
func Viewport(msgs []sessions.Message, summary *string, budget int) []sessions.Message {
	full := window(msgs, budget)
	if summary == nil || holdsSummary(msgs[full:], summary) {
		return msgs[full:len(msgs):len(msgs)]
	}
	// The header's count is at most standsFor(msgs): estimate with that.
	reserve := EstimateMessage(&sessions.Message{Role: sessions.RoleUser,
		Text: header(standsFor(msgs), ViewportStrategy) + "\n" + *summary})
	if reserve > budget {
		return msgs[full:len(msgs):len(msgs)]
	}
	start := window(msgs, budget-reserve)
	if start == len(msgs) && full < len(msgs) {
		return msgs[full:len(msgs):len(msgs)]
	}
	out := make([]sessions.Message, 0, 1+len(msgs)-start)
	out = append(out, SummaryMessage(standsFor(msgs[:start]), ViewportStrategy, *summary))
	return append(out, msgs[start:]...)
}

// window returns the start of the newest whole units of msgs whose
// estimate fits in budget.
func window(msgs []sessions.Message, budget int) int {
	start, used := len(msgs), 0
	for start > 0 {
		u := start - 1
		for u > 0 && msgs[u].Role == sessions.RoleTool {
			u--
		}
		if msgs[u].Role == sessions.RoleTool || (u < start-1 && !msgs[u].HasToolCalls()) {
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

// holdsSummary reports whether msgs include a summary message whose body is
// *summary.
func holdsSummary(msgs []sessions.Message, summary *string) bool {
	if summary == nil {
		return false
	}
	for i := range msgs {
		if s, ok := ParseSummary(&msgs[i]); ok && s.Body == *summary {
			return true
		}
	}
	return false
}
