package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// Prompts sent while a turn of their session runs are queued (seed 004's
// staging of a message that arrives mid-turn): each runs as a turn of
// its own, in the order they came, after the running one. A queued
// prompt is stored when its turn starts, so it can never interleave with
// the running turn's tool calls and results. The queue lives in the
// process that accepted the prompts; MaxQueued bounds it.

// MaxQueued bounds the prompts waiting behind a session's running turn;
// one more is refused with 409 queue_full.
const MaxQueued = 8

// queuedPrompt is a prompt waiting for its turn.
type queuedPrompt struct {
	agent string
	text  string
}

// promptQueue is a session's waiting prompts. The server's mu guards it.
type promptQueue struct {
	items []queuedPrompt
	// starting is set while a goroutine (runQueued) is taking the turn
	// lock for the head.
	starting bool
}

// eventQueue is the transient event the server publishes to a session's
// SSE clients when its queue changes: {"queued": N}, the prompts waiting.
const eventQueue = "queue"

// queued returns how many prompts of session id wait in this server's
// queue.
func (s *Server) queued(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[id]; q != nil {
		return len(q.items)
	}
	return 0
}

// queueChanged tells session id's SSE clients that n prompts wait now.
// Publishing never blocks, so s.mu may be held.
func (s *Server) queueChanged(id string, n int) {
	s.store.Publish(sessions.Event{Type: eventQueue, SessionID: id, Data: map[string]any{"queued": int64(n)}})
}

// enqueueIfBusy queues the prompt when a turn of session id runs in this
// process or prompts already wait, returning its position (0: not
// queued, the caller starts the turn).
func (s *Server) enqueueIfBusy(id, agentName, text string, rec *sessions.Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] == nil && s.queues[id] == nil {
		return 0, nil
	}
	return s.enqueueLocked(id, agentName, text, rec)
}

// enqueue queues the prompt behind the session's running turn and
// returns its position.
func (s *Server) enqueue(id, agentName, text string, rec *sessions.Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueueLocked(id, agentName, text, rec)
}

// enqueueLocked queues a prompt (s.mu held). It refuses it when the queue
// is full, when the server shuts down, or when the session's turn cap
// would be reached before it ran (counting the running turn and the
// prompts ahead). A queue with no turn of this process in front of it
// (the turn runs in another process) gets a goroutine that starts its
// head as soon as the session's turn lock is free.
func (s *Server) enqueueLocked(id, agentName, text string, rec *sessions.Record) (int, error) {
	if s.draining {
		return 0, errorf(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
	q := s.queues[id]
	if q == nil {
		q = &promptQueue{}
	}
	if len(q.items) >= MaxQueued {
		return 0, errorf(http.StatusConflict, "queue_full", "%d prompts of session '%s' already wait for the running turn (the limit); retry when a turn has ended", MaxQueued, id)
	}
	if limit := s.turnCap(rec); limit > 0 {
		ahead := rec.Turns + len(q.items)
		if t := s.running[id]; t != nil {
			ahead = t.base + 1 + len(q.items)
		}
		if ahead >= limit {
			return 0, &turnLimitRefusal{id: id, limit: limit, turns: rec.Turns}
		}
	}
	q.items = append(q.items, queuedPrompt{agent: agentName, text: text})
	s.queues[id] = q
	s.log.Info("prompt queued", "id", id, "position", len(q.items))
	s.queueChanged(id, len(q.items))
	if s.running[id] == nil {
		s.startQueued(id)
	}
	return len(q.items), nil
}

// startQueued starts a goroutine that runs the head of session id's
// queue, unless the queue is empty or one already does (s.mu held).
func (s *Server) startQueued(id string) {
	q := s.queues[id]
	if q == nil || q.starting {
		return
	}
	if len(q.items) == 0 {
		delete(s.queues, id)
		return
	}
	q.starting = true
	s.turns.Add(1)
	go s.runQueued(id, q)
}

// queuePause bounds the pause between two attempts of runQueued to take
// a session's turn lock.
const queuePause = 50 * time.Millisecond

// runQueued runs the head of session id's queue as a turn: it waits for
// the session's turn lock (another process's turn, a request holding
// it) and for a free turn slot, checks the session as a prompt's turn
// does, and runs the turn. A session that ended, or a prompt the session
// can no longer take, drops the queue (logged); so does the end of the
// server's grace period.
func (s *Server) runQueued(id string, q *promptQueue) {
	defer s.turns.Done()
	ctx := s.turnCtx
	pause := time.Millisecond
	var t *turn
	for {
		var err error
		t, err = s.startTurn(ctx, id, true)
		if err == nil {
			break
		}
		var ae *apiError
		if !errors.Is(err, errBusy) && !(errors.As(err, &ae) && ae.status == http.StatusTooManyRequests) {
			s.dropQueued(id, "the turn could not start: "+err.Error())
			return
		}
		select {
		case <-ctx.Done():
			s.dropQueued(id, "the server shut down")
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, queuePause)
	}
	s.mu.Lock()
	if s.queues[id] != q || len(q.items) == 0 {
		// Dropped meanwhile (a delete, a completion).
		s.mu.Unlock()
		s.releaseTurn(id, t)
		return
	}
	head := q.items[0]
	q.items = q.items[1:]
	q.starting = false
	if len(q.items) == 0 {
		delete(s.queues, id)
	}
	s.queueChanged(id, len(q.items))
	s.mu.Unlock()
	ag, ok := s.cfg.Agents[head.agent]
	err := s.admitQueued(id, t, ok)
	if err != nil {
		s.releaseTurn(id, t)
		s.dropQueued(id, err.Error())
		s.log.Warn("queued prompt not run", "id", id, "reason", err.Error())
		return
	}
	s.runTurn(id, head.agent, ag, head.text, t)
}

// admitQueued checks, under the turn lock, that a queued prompt may run.
func (s *Server) admitQueued(id string, t *turn, agentKnown bool) error {
	if !agentKnown {
		return errors.New("its agent is gone")
	}
	// admit reads the session afresh (its meta refreshes the store's
	// copy); a turn cancelled meanwhile does not start.
	if err := t.ctx.Err(); err != nil {
		return err
	}
	return s.admit(context.WithoutCancel(t.ctx), id, t)
}

// dropQueued drops the prompts waiting for session id's turns, logging
// how many and why, and returns how many there were.
func (s *Server) dropQueued(id, why string) int {
	s.mu.Lock()
	q := s.queues[id]
	n := 0
	if q != nil {
		n = len(q.items)
		if q.starting {
			// The goroutine starting the head finds the queue gone.
			q.items = nil
		}
		delete(s.queues, id)
	}
	s.mu.Unlock()
	if n > 0 {
		s.queueChanged(id, 0)
		s.log.Warn("queued prompts dropped", "id", id, "count", n, "reason", why)
	}
	return n
}
