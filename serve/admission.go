package serve

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// Admission. At most MaxRunning turns run at once in a process. A prompt
// that finds every slot taken waits for one, first come first served,
// and its turn starts as soon as a turn ends: a burst of prompts is
// spread over the slots instead of being refused. A prompt is refused
// with 429 too_many_turns only when MaxSessions prompts already wait, or
// when it waited Config.AdmissionWait (default MaxAdmissionWait) without
// getting a slot. A prompt queued
// behind its session's running turn (queue.go) waits for a slot the same
// way, without the time limit.

// MaxAdmissionWait is the default of Config.AdmissionWait: how long a
// prompt waits for a turn slot before it is refused with 429
// too_many_turns.
const MaxAdmissionWait = 30 * time.Second

// DefaultMaxRunning returns the default of Config.MaxRunning for a store
// over backend on this machine: 4 turns per core (GOMAXPROCS), which keeps
// the cores busy while turns wait on the store, and for a store that
// takes writes from several connections at once (PostgreSQL: its
// connection pool) at least as many turns as it has connections, so
// that their commits can share the database's flushes. SQLite takes one
// write at a time, and the memory store none that waits, so for those
// the cores alone decide.
func DefaultMaxRunning(backend sessions.Backend) int {
	n := 4 * runtime.GOMAXPROCS(0)
	if p, ok := backend.(interface{ MaxConns() int }); ok {
		n = max(n, p.MaxConns())
	}
	return n
}

// slotWaiter is a prompt waiting for a turn slot. The server's mu guards
// its fields.
type slotWaiter struct {
	ready   chan struct{} // closed when the waiter was granted a slot or refused
	granted bool          // a slot was reserved for it (counted in starting)
	queued  bool          // a queued prompt's (not refused at shutdown)
}

// takeSlot reserves a turn slot for a new turn, counting it in
// s.starting, waiting for one when MaxRunning turns run or start (s.mu
// held; it is released while waiting and held again on return). It
// returns a 429 when MaxSessions prompts already wait or, unless queued,
// after Config.AdmissionWait; a 503 when the server shuts down meanwhile
// (unless queued); ctx's error when ctx ends first.
func (s *Server) takeSlot(ctx context.Context, queued bool) error {
	if len(s.waiting) == 0 && s.used() < s.cfg.MaxRunning {
		s.starting++
		return nil
	}
	if !queued && len(s.waiting) >= s.cfg.MaxSessions {
		return s.errTooManyTurns()
	}
	w := &slotWaiter{ready: make(chan struct{}), queued: queued}
	s.waiting = append(s.waiting, w)
	s.metrics.turnsWaiting.Set(float64(len(s.waiting)))
	s.mu.Unlock()
	var timeout <-chan time.Time
	if !queued {
		t := time.NewTimer(s.cfg.AdmissionWait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	timedOut := false
	select {
	case <-w.ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		timedOut = true
	}
	s.mu.Lock()
	if timedOut {
		err = s.errTooManyTurns() // it reads the counts s.mu guards
	}
	switch {
	case w.granted && err == nil:
		return nil
	case w.granted:
		// Granted while giving up: the slot goes to the next.
		s.starting--
		s.grantSlots()
	case err == nil:
		// Refused: the server shuts down.
		return errShuttingDown()
	default:
		s.waiting = slices.DeleteFunc(s.waiting, func(x *slotWaiter) bool { return x == w })
		s.metrics.turnsWaiting.Set(float64(len(s.waiting)))
	}
	return err
}

// used is how many turn slots are taken (s.mu held).
func (s *Server) used() int { return len(s.running) + s.starting }

// grantSlots gives the free turn slots to the prompts waiting longest
// (s.mu held). Call it whenever a slot frees.
func (s *Server) grantSlots() {
	for len(s.waiting) > 0 && s.used() < s.cfg.MaxRunning {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		w.granted = true
		s.starting++
		close(w.ready)
	}
	s.metrics.turnsWaiting.Set(float64(len(s.waiting)))
}

// refuseWaiting refuses the prompts waiting for a slot that are not
// queued ones (shutdown; s.mu held): they get 503.
func (s *Server) refuseWaiting() {
	s.waiting = slices.DeleteFunc(s.waiting, func(w *slotWaiter) bool {
		if !w.queued {
			close(w.ready)
		}
		return !w.queued
	})
	s.metrics.turnsWaiting.Set(float64(len(s.waiting)))
}

// errTooManyTurns is the 429 of a prompt that cannot wait for a turn
// slot (s.mu held).
func (s *Server) errTooManyTurns() error {
	return &apiError{status: http.StatusTooManyRequests, code: "too_many_turns", retryAfter: retryRunning,
		message: strconv.Itoa(s.used()) + " turns are running (the server's limit, --max-running " + strconv.Itoa(s.cfg.MaxRunning) +
			") and " + strconv.Itoa(len(s.waiting)) + " prompts wait for one to end; retry in " + strconv.Itoa(retryRunning) + " seconds"}
}

// errShuttingDown is the 503 of a request the server refuses because it
// shuts down.
func errShuttingDown() error {
	return errorf(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
}
