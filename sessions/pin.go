package sessions

import (
	"context"
	"sync"
)

// A session an agent loop runs on is pinned (Store.Pin) for the loop's
// duration: the LRU does not evict it, however many other sessions the
// loop's tools, sub-agents or other clients open meanwhile. Evicting it
// would drop the loop's transcript (a store that is not durable deletes
// an evicted session) or leave the loop writing a copy that is no longer
// the live one. A pinned session pushed out of the LRU waits in
// pins.held until its last pin is released, then re-enters the LRU as
// its most recently used session.

// pinSet holds the pin counts and the pinned sessions pushed out of the
// LRU.
type pinSet struct {
	mu    sync.Mutex
	count map[*Session]int
	held  map[string]*Session // pinned sessions the LRU pushed out
}

// Pin keeps session id live until the returned function is called (once;
// later calls do nothing): loading it from a durable backend if needed,
// like a write. Pins nest.
func (s *Store) Pin(ctx context.Context, id string) (unpin func(), err error) {
	for {
		sess, err := s.get(ctx, id)
		if err != nil {
			return nil, err
		}
		// Pinned under s.mu if still live (eviction happens under s.mu);
		// else it left the LRU meanwhile: get it again.
		s.mu.Lock()
		cur, ok := s.lru.Peek(id)
		if !ok {
			cur, ok = s.held(id)
		}
		if ok && cur == sess {
			s.pins.mu.Lock()
			if s.pins.count == nil {
				s.pins.count, s.pins.held = map[*Session]int{}, map[string]*Session{}
			}
			s.pins.count[sess]++
			s.pins.mu.Unlock()
			s.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { s.unpin(id, sess) }) }, nil
		}
		s.mu.Unlock()
	}
}

func (s *Store) unpin(id string, sess *Session) {
	defer s.settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins.mu.Lock()
	s.pins.count[sess]--
	back := false
	if s.pins.count[sess] <= 0 {
		delete(s.pins.count, sess)
		if s.pins.held[id] == sess {
			delete(s.pins.held, id)
			back = true
		}
	}
	s.pins.mu.Unlock()
	if back {
		s.lru.Add(id, sess)
	}
}

// hold keeps sess, which the LRU is evicting for room, when it is
// pinned, and reports whether it did. The caller holds s.mu.
func (s *Store) hold(id string, sess *Session) bool {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	if s.pins.count[sess] == 0 {
		return false
	}
	s.pins.held[id] = sess
	return true
}

// held returns the pinned session id pushed out of the LRU, if any.
func (s *Store) held(id string) (*Session, bool) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	sess, ok := s.pins.held[id]
	return sess, ok
}

// heldIDs returns the ids of the pinned sessions pushed out of the LRU.
func (s *Store) heldIDs() []string {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	ids := make([]string, 0, len(s.pins.held))
	for id := range s.pins.held {
		ids = append(ids, id)
	}
	return ids
}

// live returns the live session id without refreshing its recency: the
// LRU's, a pinned one pushed out of it, or one leaving it whose staged
// changes are not committed yet. The caller may hold s.mu.
func (s *Store) live(id string) (*Session, bool) {
	if sess, ok := s.lru.Peek(id); ok {
		return sess, true
	}
	if sess, ok := s.held(id); ok {
		return sess, true
	}
	return s.leavingSession(id)
}

// remove drops session id from the LRU (and from the held pinned
// sessions) on purpose: closed, deleted, unloaded or stale, whether
// pinned or not. The caller holds s.mu.
func (s *Store) remove(id string) {
	s.pins.mu.Lock()
	delete(s.pins.held, id)
	s.pins.mu.Unlock()
	s.removing = true
	s.lru.Remove(id)
	s.removing = false
}
