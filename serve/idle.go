package serve

import (
	"context"
	"errors"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// reasonIdle is metadata.reason of a session completed for inactivity.
const reasonIdle = "idle_timeout"

// startReaper starts the idle reaper: every so often (a tenth of the
// idle timeout, between 10ms and a minute) it completes the served
// sessions that have been idle for the timeout. It returns the function
// that stops it.
func (s *Server) startReaper() (stop func()) {
	every := min(max(s.cfg.IdleTimeout/10, 10*time.Millisecond), time.Minute)
	return s.runEvery(every, func(ctx context.Context) {
		if err := s.reapIdle(ctx); err != nil && ctx.Err() == nil {
			s.metrics.storeErrors.Inc()
			s.log.Error("idle cleanup failed", "err", err)
		}
	})
}

// runEvery calls fn every interval on a goroutine of its own until the
// returned function is called, which waits for the last call to end.
func (s *Server) runEvery(interval time.Duration, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				fn(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// reapIdle completes, with metadata.reason "idle_timeout", every active
// served session without activity (no write: no prompt, no agent
// progress) for the idle timeout, and unloads it. It holds the
// session's turn lock while it does, so no turn starts meanwhile in this
// process or another; a session whose lock is held is busy, not idle.
// Replicas sharing the store all reap; the lock and a second look at the
// session under it make each session reaped once.
func (s *Server) reapIdle(ctx context.Context) error {
	cutoff := s.store.Now().Add(-s.cfg.IdleTimeout)
	list, _, err := s.store.Backend().List(ctx, sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}, UpdatedBefore: cutoff})
	if err != nil {
		return err
	}
	for _, sum := range list {
		if strOf(sum.Metadata, metaAgent) == "" {
			continue
		}
		lk, err := s.locks.TryLock(ctx, turnLock(sum.ID))
		if errors.Is(err, sessions.ErrLocked) {
			continue
		}
		if err != nil {
			return err
		}
		err = s.reapLocked(ctx, sum.ID, cutoff)
		s.unlock(lk)
		if err != nil && !errors.Is(err, sessions.ErrNotFound) {
			return err
		}
	}
	return nil
}

// reapLocked completes session id if it is still active and idle since
// before cutoff. The caller holds its turn lock.
func (s *Server) reapLocked(ctx context.Context, id string, cutoff time.Time) error {
	if err := s.store.Refresh(ctx, id); err != nil {
		return err
	}
	rec, err := s.store.Meta(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status != sessions.StatusActive || !rec.UpdatedAt.Before(cutoff) {
		return nil
	}
	if err := s.end(ctx, id, sessions.StatusCompleted, reasonIdle, ""); err != nil {
		return err
	}
	s.store.Unload(id)
	return nil
}
