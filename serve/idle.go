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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.reapIdle(ctx); err != nil && ctx.Err() == nil {
					s.metrics.storeErrors.Inc()
					s.log.Error("idle cleanup failed", "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// reapIdle completes, with metadata.reason "idle_timeout", every active
// served session without activity (no write: no prompt, no agent
// progress) for the idle timeout and no running turn, and unloads it.
func (s *Server) reapIdle(ctx context.Context) error {
	cutoff := s.store.Now().Add(-s.cfg.IdleTimeout)
	list, _, err := s.store.Backend().List(ctx, sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}, UpdatedBefore: cutoff})
	if err != nil {
		return err
	}
	for _, sum := range list {
		// Reserve the session against new turns while it is completed
		// (startTurn refuses a reaping session; a prompt that passed its
		// status check before this re-checks it once its turn is
		// registered).
		s.mu.Lock()
		served, busy := s.active[sum.ID], s.running[sum.ID] != nil
		if served && !busy {
			s.reaping[sum.ID] = true
		}
		s.mu.Unlock()
		if !served || busy {
			continue
		}
		err := s.end(ctx, sum.ID, sessions.StatusCompleted, reasonIdle, "")
		s.mu.Lock()
		delete(s.reaping, sum.ID)
		s.mu.Unlock()
		if err != nil {
			if errors.Is(err, sessions.ErrNotFound) {
				s.deactivate(sum.ID, "deleted")
				continue
			}
			return err
		}
		s.store.Unload(sum.ID)
	}
	return nil
}
