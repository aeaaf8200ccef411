package sessions

import (
	"fmt"
	"github.com/skein-dev/skein/sessions/message"
)

// TrimDrop returns how many messages to drop from the front of v so that
// at most keepLast remain and the kept part does not start with a tool
// result cut off from its call: when the plain cut would do that, the cut
// moves forward to the next message that starts a turn (a user, system
// or assistant message), keeping fewer messages. keepLast must be >= 0.
func TrimDrop(v message.View, keepLast int) int {
	n := v.Len()
	drop := n - keepLast
	if drop <= 0 {
		return 0
	}
	for drop < n && v.At(drop).Role == message.RoleTool {
		drop++
	}
	return drop
}

// UserTurns returns the indexes in v of the user messages that start a
// user turn: the first of a run of consecutive user messages, unless
// every message of the run is one the agent loop adds inside a turn
// (feedback, with metadata "feedback_kind"; a nudge, with metadata
// "nudge"). A turn runs from its first message to the next turn's, so
// cutting there never separates a tool call from its results.
func UserTurns(v message.View) []int {
	var out []int
	for i := 0; i < v.Len(); {
		if v.At(i).Role != message.RoleUser {
			i++
			continue
		}
		start, typed := i, false
		for ; i < v.Len() && v.At(i).Role == message.RoleUser; i++ {
			typed = typed || !loopAdded(v.At(i))
		}
		if typed {
			out = append(out, start)
		}
	}
	return out
}

// loopAdded reports whether m is a user message the agent loop added
// (feedback or a nudge) rather than a prompt.
func loopAdded(m *message.Message) bool {
	_, feedback := m.Metadata["feedback_kind"]
	_, nudge := m.Metadata["nudge"]
	return feedback || nudge
}

// RewindDrop returns how many messages to drop from the end of v to
// remove its last turns user turns (see UserTurns): everything from the
// user message that starts the turns'th turn from the end. turns must be
// >= 1 and at most the number of user turns.
func RewindDrop(v message.View, turns int) (int, error) {
	starts := UserTurns(v)
	switch {
	case turns < 1:
		return 0, fmt.Errorf("'turns' must be >= 1")
	case turns > len(starts):
		return 0, fmt.Errorf("cannot rewind %d user turns: the session has %d", turns, len(starts))
	}
	return v.Len() - starts[len(starts)-turns], nil
}
