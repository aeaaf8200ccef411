package sessions

import (
	"errors"
	"fmt"
)

// A store over a backend that is not durable (the memory backend) loses
// a session that leaves its LRU. By default that is what its cap means:
// the least recently used session is pushed out and gone. A store told
// to RefuseWhenFull keeps every session instead and refuses a new one
// once it holds its cap of them: creating it fails with ErrFull before
// anything is written.

// ErrFull is the error of a new session refused because the store holds
// its cap of sessions and would lose one to make room (RefuseWhenFull).
var ErrFull = errors.New("the store is full")

// RefuseWhenFull makes the store refuse a new session (Create, Open or
// OpenWith of an unknown id, Fork) with ErrFull once it holds its cap of
// sessions, when its backend is not durable. skein serve --store memory
// needs it: there, a session created inside a turn (a sub-agent, a fork,
// a script's session) would otherwise push another client's session out
// and lose it. A durable store ignores it: its sessions leave memory and
// are reloaded when used. Call it before the store is used.
func (s *Store) RefuseWhenFull() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.full.refuse = !s.backend.Durable()
}

// fullGuard counts, under s.mu, the sessions being created while the
// store refuses new sessions past its cap.
type fullGuard struct {
	refuse   bool
	creating int
}

// reserve counts session id, about to be created, against the cap while
// the store refuses new sessions past it: ErrFull (as an error about id)
// when the live sessions and those being created fill the cap. A
// reservation (reserved true) ends with added, once the session entered
// the LRU, or with unreserve, when it was not created.
func (s *Store) reserve(id string) (reserved bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full.refuse {
		return false, nil
	}
	s.pins.mu.Lock()
	n := s.lru.Len() + len(s.pins.held) + s.full.creating
	s.pins.mu.Unlock()
	if n >= s.cap {
		return false, wrap(id, fmt.Errorf("%w: the memory store already holds %d sessions, its cap (--session-cap), and a new one would push one out and lose it", ErrFull, s.cap))
	}
	s.full.creating++
	return true, nil
}

// added ends a reservation whose session entered the LRU (s.mu held).
func (s *Store) added(reserved bool) {
	if reserved {
		s.full.creating--
	}
}

// unreserve ends a reservation whose session was not created.
func (s *Store) unreserve(reserved bool) {
	if reserved {
		s.mu.Lock()
		s.full.creating--
		s.mu.Unlock()
	}
}
