package sessions

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Locking. A Store does its backend I/O for a session (loading it cold
// and healing it, creating it, committing its staged changes when it
// leaves the LRU, deleting it) holding that session's id lock only, so
// the round trips of different sessions overlap; Store.mu guards the
// LRU's bookkeeping (adding, removing, the sessions leaving it) for a
// few map operations at a time and is never held across I/O.
//
// Lock order: an id lock, then Store.mu, then a session's mu, then
// pinSet.mu or departures.mu; a session's mu is never held while taking
// Store.mu. A goroutine holds at most one id lock.

// idLocks are the per-session-id locks of a Store: an entry exists while
// the lock is held or waited for.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

// idLock is one id's lock: a token in a channel of capacity one, so a
// waiter can give up when its context ends.
type idLock struct {
	ch   chan struct{}
	refs int // holders and waiters
}

// lock takes the lock of id and returns its release, or the cause of
// ctx's end if ctx ends while it waits (a free lock is taken whatever
// ctx says: the backend call under it decides what a done ctx means).
func (l *idLocks) lock(ctx context.Context, id string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*idLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &idLock{ch: make(chan struct{}, 1)}
		l.m[id] = e
	}
	e.refs++
	l.mu.Unlock()
	unlock := func() { <-e.ch; l.done(id, e) }
	select {
	case e.ch <- struct{}{}: // free: taken whatever ctx says, as before a wait
		return unlock, nil
	default:
	}
	select {
	case e.ch <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		l.done(id, e)
		return nil, context.Cause(ctx)
	}
}

// done drops a holder's or waiter's reference to e.
func (l *idLocks) done(id string, e *idLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, id)
	}
}

// departures are the durable sessions pushed out of the LRU whose staged
// changes are not committed yet, by id (see settle). Its mu comes after
// Store.mu.
type departures struct {
	mu sync.Mutex
	m  map[string]*Session
}

// leave records sess leaving the LRU. The caller holds s.mu.
func (s *Store) leave(id string, sess *Session) {
	s.leaving.mu.Lock()
	defer s.leaving.mu.Unlock()
	if s.leaving.m == nil {
		s.leaving.m = map[string]*Session{}
	}
	s.leaving.m[id] = sess
}

// leavingSession returns the session id that left the LRU and is not yet
// committed, if any.
func (s *Store) leavingSession(id string) (*Session, bool) {
	s.leaving.mu.Lock()
	defer s.leaving.mu.Unlock()
	sess, ok := s.leaving.m[id]
	return sess, ok
}

// takeLeaving removes and returns the session id that left the LRU and
// is not yet committed, if any.
func (s *Store) takeLeaving(id string) (*Session, bool) {
	s.leaving.mu.Lock()
	defer s.leaving.mu.Unlock()
	sess, ok := s.leaving.m[id]
	delete(s.leaving.m, id)
	return sess, ok
}

// settle commits the staged changes of the sessions that left the LRU,
// each under its id lock, outside s.mu, and returns the first error.
// Whoever changed the LRU calls it once it holds no id lock.
func (s *Store) settle() error {
	s.leaving.mu.Lock()
	ids := slices.Collect(maps.Keys(s.leaving.m))
	s.leaving.mu.Unlock()
	var first error
	for _, id := range ids {
		unlock, _ := s.ids.lock(context.Background(), id)
		if err := s.depart(id); err != nil && first == nil {
			first = err
		}
		unlock()
	}
	return first
}

// depart commits the staged changes of session id if it left the LRU
// and forgets it. A failure is returned and also reported by the
// session's next Commit. The caller holds the id lock of id.
func (s *Store) depart(id string) error {
	sess, ok := s.takeLeaving(id)
	if !ok {
		return nil
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.evicted = true
	_, err := s.commitLocked(context.Background(), sess)
	if err != nil {
		s.setLost(id, err)
	}
	return err
}

// revive puts back in the LRU session id if it left it and is not yet
// committed, and returns it. The caller holds the id lock of id.
func (s *Store) revive(id string) (*Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.takeLeaving(id)
	if ok {
		s.lru.Add(id, sess)
	}
	return sess, ok
}
