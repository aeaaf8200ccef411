package sqlite

import "github.com/skein-dev/skein/sessions/internal/rowstore"

// maxKnown bounds the states knownStates keeps; past it, it starts over.
const maxKnown = 1024

// head is a session's write state: what its sessions row and its newest
// writes row hold, and what a write builds the next row from.
type head struct {
	rowstore.State // sid, version, length and view (its base from the sessions row)
	turns, updated int64
	seqEnd         int64 // the seq after the newest event
	// touched is the sessions row's column touched: the minute of the
	// write before (rowstore.Touched), which insertWrite updates.
	touched int64
}

// knownStates holds, by session id, the state this Backend's last write
// of the session left, so that the next write of the same session need
// not read it (see Backend.Write). A state is only a guess: the write
// that uses it inserts its row keyed by the session's sid and the
// version it was made on, which fails when another writer has made a
// write on that version (the key is taken) or deleted the session (the
// sid is gone; a deleted session's sid is never reused), so a write
// that succeeds followed that state. The caller holds Backend.wmu.
type knownStates struct {
	m map[string]*head
}

// get returns the known state of session id if its version is base, or
// nil.
func (k *knownStates) get(id string, base int64) *head {
	if h := k.m[id]; h != nil && h.Version == base {
		return h
	}
	return nil
}

// put records h as session id's state.
func (k *knownStates) put(id string, h *head) {
	if k.m == nil || len(k.m) >= maxKnown {
		k.m = make(map[string]*head)
	}
	k.m[id] = h
}
