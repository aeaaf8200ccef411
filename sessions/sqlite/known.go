package sqlite

import "github.com/skein-dev/skein/sessions/internal/rowstore"

// maxKnown bounds the states knownStates keeps; past it, it starts over.
const maxKnown = 1024

// knownStates holds, by session id, the state this Backend's last write
// of the session left, so that the next write of the same session need
// not read it (see Backend.Write). A state is only a guess: the write
// that uses it updates the session's row on the condition that its sid
// and version are the state's, and a session's row changes only with
// its version (and a deleted session's sid is never reused), so a
// matching row is in that state. The caller holds Backend.wmu.
type knownStates struct {
	m map[string]*rowstore.State
}

// get returns the known state of session id if its version is base, or
// nil.
func (k *knownStates) get(id string, base int64) *rowstore.State {
	if st := k.m[id]; st != nil && st.Version == base {
		return st
	}
	return nil
}

// put records st as session id's state.
func (k *knownStates) put(id string, st *rowstore.State) {
	if k.m == nil || len(k.m) >= maxKnown {
		k.m = make(map[string]*rowstore.State)
	}
	k.m[id] = st
}
