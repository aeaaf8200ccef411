package serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// The server takes its locks from the store's backend when the backend
// has cross-process locks (sessions.LockerBackend: every process serving
// the store, replicas included, then agrees), else from a lock table of
// its own process.
//
// A session's turn lock is held by whoever changes the session: a
// running turn, the idle reaper completing it, a delete, the repair of a
// turn a dead replica left behind. The create lock makes counting active
// sessions and creating one atomic across replicas.

// turnLock is the name of session id's turn lock.
func turnLock(id string) string { return "serve/turn/" + id }

// lockCreate is the name of the lock held while a session is counted
// against MaxSessions and created.
const lockCreate = "serve/create"

// Interrupt reasons the server sends to a turn lock's holder.
const (
	reasonCancel = "cancel" // POST .../cancel: stop the turn, keep the session active
	reasonDelete = "delete" // DELETE: stop the turn, the session is ending
)

// errLockLost is the cancellation cause of a turn whose lock was lost.
var errLockLost = errors.New("the turn's lock was lost (the store was unreachable for too long)")

// interruptCause is the cancellation cause of a turn whose lock was
// interrupted for reason.
func interruptCause(reason string) error {
	switch reason {
	case reasonCancel:
		return errCancelRequested
	case reasonDelete:
		return errDeleted
	}
	return errLockLost
}

// newLocker returns the locks of the store's backend, or a lock table of
// this process.
func newLocker(store *sessions.Store, poll time.Duration) (sessions.Locker, error) {
	if lb, ok := store.Backend().(sessions.LockerBackend); ok {
		return lb.NewLocker(poll)
	}
	return sessions.NewLocalLocker(), nil
}

// lockWait bounds how long a request waits for a lock another holder
// has (a delete waiting for a turn to stop, a create for another).
const lockWait = 30 * time.Second

// maxLockPause bounds the pause between two attempts of waitLock: the
// locks it waits for are held for milliseconds (a create) or until a
// turn has stopped.
const maxLockPause = 20 * time.Millisecond

// askAgain is how often waitLock repeats its interrupt: the lock may
// have passed to a holder that did not get the first.
const askAgain = time.Second

// waitLock takes the lock called name, waiting while another holder has
// it, up to lockWait; what names what the lock guards, for the 503 when
// the wait is over. With interrupt set it asks the holder to give the
// lock up, with that reason.
func (s *Server) waitLock(ctx context.Context, name, what, interrupt string) (sessions.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	pause := time.Millisecond
	var asked time.Time
	for {
		lk, err := s.locks.TryLock(ctx, name)
		if !errors.Is(err, sessions.ErrLocked) {
			return lk, err
		}
		if interrupt != "" && time.Since(asked) >= askAgain {
			if _, err := s.locks.Interrupt(ctx, name, interrupt); err != nil {
				return nil, err
			}
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == context.DeadlineExceeded {
				return nil, &apiError{status: http.StatusServiceUnavailable, code: "busy", retryAfter: 5,
					message: what + " stayed busy for " + lockWait.String() + " (another request or turn held it); retry later"}
			}
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, maxLockPause)
	}
}

// unlock releases lk, logging a failure (the lock is then held until the
// backend sees it abandoned).
func (s *Server) unlock(lk sessions.Lock) {
	if err := lk.Unlock(context.Background()); err != nil {
		s.metrics.storeErrors.Inc()
		s.log.Error("releasing a lock failed", "err", err)
	}
}

// unlockTurn releases a turn's lock: without waiting for the store when
// its locker can (sessions.SoonUnlocker: PostgreSQL sends the release
// with the connection's next lock statement, within 10 ms), else as
// unlock does. The next turn of the session in this process takes the
// lock after the release all the same; another process may find it held
// for those milliseconds, as if the turn had ended that much later.
func (s *Server) unlockTurn(lk sessions.Lock) {
	if su, ok := lk.(sessions.SoonUnlocker); ok {
		su.UnlockSoon()
		return
	}
	s.unlock(lk)
}

// runningAnywhere returns which of ids have their turn lock held (a
// turn, or another change, in progress in this process or another) or
// prompts queued in this process.
func (s *Server) runningAnywhere(ctx context.Context, ids []string) map[string]bool {
	out := map[string]bool{}
	var ask []string
	s.mu.Lock()
	for _, id := range ids {
		if s.running[id] != nil || s.queues[id] != nil {
			out[id] = true
		} else {
			ask = append(ask, turnLock(id))
		}
	}
	s.mu.Unlock()
	if len(ask) == 0 {
		return out
	}
	held, err := s.locks.Held(ctx, ask)
	if err != nil {
		s.metrics.storeErrors.Inc()
		s.log.Error("reading the turn locks failed", "err", err)
		return out
	}
	for _, id := range ids {
		if held[turnLock(id)] {
			out[id] = true
		}
	}
	return out
}

// runningHere reports whether a turn of session id runs, or prompts of
// it are queued, in this process.
func (s *Server) runningHere(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[id] != nil || s.queues[id] != nil
}

// busyHere returns the sessions with a turn running or prompts queued in
// this process.
func (s *Server) busyHere() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.running)+len(s.queues))
	for id := range s.running {
		out[id] = true
	}
	for id := range s.queues {
		out[id] = true
	}
	return out
}

// repairAbandoned heals the sessions whose turn lock a dead holder left
// behind (a replica killed mid-turn): their open tool calls get error
// results, so that every read shows a valid transcript again.
func (s *Server) repairAbandoned(ctx context.Context) error {
	names, err := s.locks.Abandoned(ctx, 100)
	if err != nil {
		return err
	}
	for _, name := range names {
		id, ok := strings.CutPrefix(name, turnLock(""))
		if !ok {
			continue
		}
		lk, err := s.locks.TryLock(ctx, name)
		if errors.Is(err, sessions.ErrLocked) {
			continue // taken meanwhile: its new holder repairs it
		}
		if err != nil {
			return err
		}
		err = s.store.Refresh(ctx, id)
		if err == nil {
			err = s.store.Heal(ctx, id, "interrupted")
		}
		s.unlock(lk)
		switch {
		case errors.Is(err, sessions.ErrNotFound):
		case err != nil:
			return err
		default:
			s.log.Info("healed a session whose turn a stopped process left behind", "id", id)
		}
	}
	return nil
}
