package sessions

import (
	"context"
	"errors"
)

// Group commit. An agent loop logs several events per step (turn_start,
// llm_call, the reply's message, its tool calls, ...). Writing each alone
// costs one backend transaction, and with a durable backend one commit,
// per event; Stage and Commit let the loop write a whole step as one.
//
// A staged change is validated, sequenced and applied to the live session
// at once, exactly as Apply would, so every read of this Store sees it;
// it reaches the backend with the session's next write: Commit, or any
// Apply, Update, Heal, Fork or Close of the session (which writes the
// staged changes and its own in one Backend.Write), or the session's
// eviction from the LRU, or Shutdown. Until then a crash of the process
// loses it, and with it only changes staged after the last write: what
// the backend holds is always a prefix of what the session did.
//
// The caller decides when its changes are acknowledged: an agent loop
// delivers a step's events to subscribers only after Commit returned.

// Stage validates ch and applies it to the live session without writing
// it to the backend (see above). It returns the events it logged,
// sequenced and stamped, for delivery once they are committed. On error
// nothing changed.
func (s *Store) Stage(ctx context.Context, id string, ch *Change) ([]Event, error) {
	return s.write(ctx, id, ch, anyVersion, true, nil)
}

// Commit writes the session's staged changes to the backend, all in one
// Backend.Write. It does nothing when none are staged (another write of
// the session may have committed them). When it fails the changes stay
// staged, so the session's next write retries them; after a write
// conflict (ErrConflict) the live copy is dropped, as in Apply. Changes
// that were lost while the session left the LRU make it fail too.
func (s *Store) Commit(ctx context.Context, id string) error {
	if err := s.takeLost(id); err != nil {
		return err
	}
	sess, ok := s.live(id)
	if !ok {
		return nil // evicted: its staged changes were committed then
	}
	sess.mu.Lock()
	stale, err := s.commitLocked(ctx, sess)
	sess.mu.Unlock()
	if stale {
		s.forget(id, sess)
	}
	return err
}

// CommitAll commits the staged changes of every live session and returns
// the first error.
func (s *Store) CommitAll(ctx context.Context) error {
	first := s.settle() // the sessions leaving the LRU first
	for _, id := range append(s.heldIDs(), s.lru.Keys()...) {
		if err := s.Commit(ctx, id); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// commitLocked writes sess's staged changes; the caller holds sess.mu.
// stale reports a write conflict: the caller must drop the live copy
// (after unlocking it).
func (s *Store) commitLocked(ctx context.Context, sess *Session) (stale bool, err error) {
	if len(sess.staged) == 0 {
		return false, nil
	}
	if err := s.backend.Write(ctx, sess.rec.ID, sess.storedVersion(), sess.staged...); err != nil {
		return errors.Is(err, ErrConflict), wrap(sess.rec.ID, err)
	}
	s.observers.committed(sess.staged)
	// The backing array serves the next step (no backend keeps it).
	clear(sess.staged)
	sess.staged = sess.staged[:0]
	return false, nil
}

// setLost records the failure to commit an evicted session's staged
// changes, for its next Commit.
func (s *Store) setLost(id string, err error) {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	if s.lost == nil {
		s.lost = map[string]error{}
	}
	s.lost[id] = err
}

// takeLost returns and forgets the error setLost recorded for id.
func (s *Store) takeLost(id string) error {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	err := s.lost[id]
	delete(s.lost, id)
	return err
}
