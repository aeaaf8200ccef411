package sessions

// TrimDrop returns how many messages to drop from the front of v so that
// at most keepLast remain and the kept part does not start with a tool
// result cut off from its call: when the plain cut would do that, the cut
// moves forward to the next message that starts a turn (a user, system
// or assistant message), keeping fewer messages. keepLast must be >= 0.
func TrimDrop(v View, keepLast int) int {
	n := v.Len()
	drop := n - keepLast
	if drop <= 0 {
		return 0
	}
	for drop < n && v.At(drop).Role == RoleTool {
		drop++
	}
	return drop
}
