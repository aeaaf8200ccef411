package compact

import (
	"github.com/skein-dev/skein/sessions/message"
)

// split decides which messages a compaction archives: msgs[lo:cut], keeping
// msgs[:lo] and msgs[cut:]. ok is false when nothing can be archived. The
// rule is written down in the package doc; in short:
//
//   - the kept prefix is the first keepFirst messages, extended over tool
//     results so it never ends inside a tool pair;
//   - the plain cut is len(msgs)-keepLast; a cut is only ever placed at a
//     turn start (any message but a tool result, or the very end when no
//     tool call is left open there), so pairs stay whole;
//   - with preferUser, the cut snaps back to the latest user message after
//     the prefix and at or before the plain cut; otherwise (and without a
//     user message there) to the latest turn start in that range; failing
//     that, forward to the first turn start after the plain cut;
//   - nothing is archived when the plain cut is not after the prefix.
func split(msgs []message.Message, keepFirst, keepLast int, preferUser bool) (lo, cut int, ok bool) {
	n := len(msgs)
	lo = keepFirst
	for lo < n && msgs[lo].Role == message.RoleTool {
		lo++
	}
	hi := n - keepLast
	if hi <= lo {
		return 0, 0, false // nothing between the prefix and the plain cut
	}
	if hi == n {
		if endIsBoundary(msgs) {
			return lo, n, true // keep_last 0: archive everything after the prefix
		}
		if hi--; hi <= lo {
			return 0, 0, false
		}
	}
	if preferUser {
		for c := hi; c > lo; c-- {
			if msgs[c].Role == message.RoleUser {
				return lo, c, true
			}
		}
	}
	for c := hi; c > lo; c-- {
		if msgs[c].Role != message.RoleTool {
			return lo, c, true
		}
	}
	for c := hi + 1; c < n; c++ {
		if msgs[c].Role != message.RoleTool {
			return lo, c, true
		}
	}
	if endIsBoundary(msgs) {
		return lo, n, true
	}
	return 0, 0, false
}

// endIsBoundary reports whether a summary message could follow msgs: no
// tool call is left open at the end.
func endIsBoundary(msgs []message.Message) bool {
	return len(message.OpenToolCalls(sliceView(msgs))) == 0
}

// sliceView adapts a message slice to message.View.
type sliceView []message.Message

func (v sliceView) Len() int                  { return len(v) }
func (v sliceView) At(i int) *message.Message { return &v[i] }
