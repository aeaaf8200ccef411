package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/telemetry"
)

// turn is one running prompt.
type turn struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the turn has ended
	lock   sessions.Lock // the session's turn lock, held while the turn runs

	once   sync.Once
	stored chan struct{} // closed when the prompt's user message is logged
	seq    int64         // that message's event seq
	index  int64         // and its index in the transcript

	// version is the session's stored version read when the turn lock
	// was taken (sessions.VersionLocker), for admit; nil: admit reads it.
	version *sessions.StoredVersion

	base int   // the session's turns before this one (set by admit)
	err  error // what the agent returned (set before done is closed)
}

// userStored records the turn's user message being logged. It runs in
// the store observer, with s.mu held.
func (t *turn) userStored(e sessions.Event) {
	t.once.Do(func() {
		t.seq = e.Seq
		t.index, _ = e.Data["index"].(int64)
		close(t.stored)
	})
}

// promptRequest is the body of POST /api/sessions/{id}/prompt.
type promptRequest struct {
	Text *string `json:"text"`
}

// promptResponse is the 202 body of a prompt that started a turn.
type promptResponse struct {
	SessionID string `json:"sessionId"`
	Turn      int    `json:"turn"`
	Seq       int64  `json:"seq"`
	Queued    bool   `json:"queued"`
}

// queuedResponse is the 202 body of a prompt queued behind a running
// turn: position 1 runs next.
type queuedResponse struct {
	SessionID string `json:"sessionId"`
	Queued    bool   `json:"queued"`
	Position  int    `json:"position"`
}

// maxPromptBytes bounds a prompt's text.
const maxPromptBytes = 256 << 10

// retryRunning is the Retry-After (seconds) of a prompt refused because
// MaxRunning turns are running.
const retryRunning = 5

// promptSession handles POST /api/sessions/{id}/prompt: it starts a turn
// in the background and answers 202 once the prompt's user message is
// stored, or, while a turn of the session runs, queues the prompt to run
// after it (202 with queued and position).
func (s *Server) promptSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req promptRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if req.Text == nil {
		return errorf(http.StatusBadRequest, "bad_field", "field text is required")
	}
	if *req.Text == "" {
		return errorf(http.StatusBadRequest, "bad_field", "field text must not be empty")
	}
	if strings.TrimSpace(*req.Text) == "" {
		// no model takes a blank user message: refused here, the session
		// stays as it is (it ended in error for good before)
		return errorf(http.StatusBadRequest, "bad_field", "field text must not be blank (only white space)")
	}
	if len(*req.Text) > maxPromptBytes {
		return errorf(http.StatusRequestEntityTooLarge, "body_too_large", "field text is longer than %d bytes", maxPromptBytes)
	}
	ctx := r.Context()
	// The store's copy, not refreshed: admit reads the session again
	// under its turn lock, from the store when another process wrote it.
	rec, err := s.cachedMeta(ctx, id)
	if err != nil {
		return err
	}
	name, ag, err := s.agentOf(id, rec)
	if err != nil {
		return err
	}
	if rec.Status != sessions.StatusActive && rec.Status != sessions.StatusError {
		return errNotActive(id, rec.Status)
	}
	if pos, err := s.enqueueIfBusy(id, name, *req.Text, rec); pos > 0 || err != nil {
		if err != nil {
			return s.refused(ctx, id, err)
		}
		writeJSON(w, http.StatusAccepted, queuedResponse{SessionID: id, Queued: true, Position: pos})
		return nil
	}
	t, err := s.startTurn(ctx, id, false)
	if errors.Is(err, errBusy) && s.reapable(rec) {
		// The session's lock may be the idle reaper's, completing it:
		// wait for the lock rather than queue behind a completion that
		// would leave the prompt accepted and never run.
		t, err = s.waitTurn(ctx, id)
	}
	if errors.Is(err, errBusy) {
		// A turn started meanwhile, here or in another process: queue
		// behind it.
		pos, err := s.enqueue(id, name, *req.Text, rec)
		if err != nil {
			return s.refused(ctx, id, err)
		}
		writeJSON(w, http.StatusAccepted, queuedResponse{SessionID: id, Queued: true, Position: pos})
		return nil
	}
	if err != nil {
		return err
	}
	// The session may have changed between the checks above and the turn
	// lock (the idle reaper completed it, a delete, a turn in another
	// process): check again now that the lock keeps them away, reading
	// what the store holds.
	if err := s.admit(ctx, id, t); err != nil {
		err = s.refused(ctx, id, err)
		s.releaseTurn(id, t)
		return err
	}
	// The turn's spans continue the caller's trace (a W3C traceparent
	// header) and name the agent.
	t.ctx = telemetry.WithAgent(telemetry.Extract(t.ctx, r.Header), name)
	go s.runTurn(id, name, ag, *req.Text, t)
	select {
	case <-t.stored:
	case <-t.done:
		select {
		case <-t.stored:
		default:
			var tl *agent.TurnLimitError
			if errors.As(t.err, &tl) {
				return errTurnLimit(id, tl.Cap)
			}
			return errors.New("the turn ended without its prompt stored")
		}
	}
	// The agent may have only staged the prompt (an agent loop commits a
	// step after its model call): commit it now, so that what is
	// acknowledged is stored.
	if err := s.store.Commit(context.WithoutCancel(ctx), id); err != nil {
		return err
	}
	n, err := s.userTurns(ctx, id, int(t.index))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, promptResponse{SessionID: id, Turn: n, Seq: t.seq})
	return nil
}

// reapable reports whether the idle reaper of some replica may be
// completing session rec now: it is active and has been idle for half
// the idle timeout or more (the half allows for the replicas' clocks).
func (s *Server) reapable(rec *sessions.Record) bool {
	return rec.Status == sessions.StatusActive && rec.UpdatedAt.Before(s.store.Now().Add(-s.cfg.IdleTimeout/2))
}

// waitTurn takes session id's turn lock as startTurn does, waiting while
// another holder has it, up to lockWait: the reaper holds it for a
// moment. It gives up with errBusy when a turn of this process runs or
// queues for the session, or when the lock is still held after
// lockWait (then a turn holds it, and the prompt can queue behind it:
// the session it ends is not idle).
func (s *Server) waitTurn(ctx context.Context, id string) (*turn, error) {
	wctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	pause := time.Millisecond
	for {
		if s.runningHere(id) {
			return nil, errBusy
		}
		select {
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, errBusy
		case <-time.After(pause):
		}
		pause = min(2*pause, maxLockPause)
		if t, err := s.startTurn(ctx, id, false); !errors.Is(err, errBusy) {
			return t, err
		}
	}
}

// agentOf returns the agent that serves session id, or a 409 when this
// server does not run it.
func (s *Server) agentOf(id string, rec *sessions.Record) (string, Agent, error) {
	name := strOf(rec.Metadata, metaAgent)
	ag, ok := s.cfg.Agents[name]
	switch {
	case name == "":
		return "", nil, errorf(http.StatusConflict, "no_agent", "session '%s' was not created by this server and has no agent", id)
	case !ok:
		return "", nil, errorf(http.StatusConflict, "no_agent", "session '%s' uses agent '%s', which this server does not run", id, name)
	}
	return name, ag, nil
}

// errNotActive is the 409 of a prompt to a session that has ended.
func errNotActive(id string, st sessions.Status) error {
	return errorf(http.StatusConflict, "not_active", "session '%s' is %s and accepts no prompts", id, st)
}

// turnCap is session rec's turn cap: its own (an agent's, or
// agent_session_open's max_turns), else the server's MaxTurns; 0: none.
func (s *Server) turnCap(rec *sessions.Record) int {
	if rec.MaxTurns > 0 {
		return rec.MaxTurns
	}
	return s.cfg.MaxTurns
}

// errTurnLimit is the 409 of a prompt past the session's turn cap: it is
// refused before anything but the refusal is stored or any model is
// called (see turnLimitRefusal), and the session stays as it was.
func errTurnLimit(id string, limit int) error {
	return errorf(http.StatusConflict, "turn_limit", "session '%s' has used its %d turns (its turn cap): the prompt was not run; the session can still be read, exported and completed", id, limit)
}

// turnLimitRefusal is the server's own refusal of a prompt past session
// id's turn cap, before the prompt reaches the agent: refused records
// it in the session's log, as an agent loop records its own refusal
// (turn_limit and session:turn_completed with error.code "turn_limit"),
// and answers the 409 of errTurnLimit.
type turnLimitRefusal struct {
	id           string
	limit, turns int
}

func (e *turnLimitRefusal) Error() string { return errTurnLimit(e.id, e.limit).Error() }

// refused returns err, the refusal of a prompt to session id; a
// turnLimitRefusal is first logged on the session (never under s.mu), and
// becomes its 409.
func (s *Server) refused(ctx context.Context, id string, err error) error {
	var r *turnLimitRefusal
	if !errors.As(err, &r) {
		return err
	}
	events := agent.TurnLimitEvents(&agent.TurnLimitError{SessionID: id, Cap: r.limit}, r.turns)
	if _, err := s.store.Apply(context.WithoutCancel(ctx), id, &sessions.Change{Events: events}); err != nil {
		return err
	}
	return errTurnLimit(id, r.limit)
}

// admit decides, under the session's turn lock, whether turn t may run:
// the session must still be active, or in error (the prompt reactivates
// it), and below its turn cap. It records the session's turns before t.
func (s *Server) admit(ctx context.Context, id string, t *turn) error {
	var rec *sessions.Record
	var err error
	if v := t.version; v != nil {
		t.version = nil
		if err = s.store.RefreshFrom(id, *v); err == nil {
			rec, err = s.cachedMeta(ctx, id)
		}
	} else {
		rec, err = s.meta(ctx, id)
	}
	if err != nil {
		return err
	}
	if rec.Status != sessions.StatusActive && rec.Status != sessions.StatusError {
		return errNotActive(id, rec.Status)
	}
	if limit := s.turnCap(rec); limit > 0 && rec.Turns >= limit {
		return &turnLimitRefusal{id: id, limit: limit, turns: rec.Turns}
	}
	if err := s.turnWorkspace(ctx, rec, t); err != nil {
		return err
	}
	if rec.Status == sessions.StatusError {
		if err := s.reactivateErrored(ctx, id, rec); err != nil {
			return err
		}
	}
	t.base = rec.Turns
	return nil
}

// reactivateErrored makes a session in error active again for a new
// prompt, recording it in a status event and an info event (its
// metadata.reason, "error", is removed).
func (s *Server) reactivateErrored(ctx context.Context, id string, rec *sessions.Record) error {
	meta := jsonvalue.CloneObject(rec.Metadata)
	delete(meta, metaReason)
	ch := &sessions.Change{Status: sessions.StatusActive, SetMetadata: true, Metadata: meta, Events: []sessions.Event{
		sessions.NewEvent(sessions.EventStatus, map[string]any{"status": string(sessions.StatusActive), "previous": string(rec.Status), metaReason: reasonReactivated}),
		sessions.NewEvent(sessions.EventInfo, map[string]any{"metadata_keys": []any{metaReason}, "message": "reactivated by a new prompt after an error", "previous": string(rec.Status)}),
	}}
	if _, err := s.store.Apply(ctx, id, ch); err != nil {
		return err
	}
	s.log.Info("session reactivated by a prompt", "id", id, "previous", string(rec.Status))
	return nil
}

// reasonReactivated is the reason of the status event of a session in
// error that a new prompt made active again.
const reasonReactivated = "reactivated_by_prompt"

// userTurns counts the user messages of the session up to index.
func (s *Server) userTurns(ctx context.Context, id string, index int) (int, error) {
	msgs, err := s.store.ReadMessages(ctx, id)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := 0; i <= index && i < len(msgs); i++ {
		if msgs[i].Role == message.RoleUser {
			n++
		}
	}
	return n, nil
}

// tryTurnLock takes session id's turn lock, reading the session's
// stored version in the same round trip when the locker can
// (sessions.VersionLocker; else the version is nil and admit reads it).
func (s *Server) tryTurnLock(ctx context.Context, id string) (sessions.Lock, *sessions.StoredVersion, error) {
	vl, ok := s.locks.(sessions.VersionLocker)
	if !ok || !s.store.Backend().Durable() {
		lk, err := s.locks.TryLock(ctx, turnLock(id))
		return lk, nil, err
	}
	lk, v, err := vl.TryLockVersion(ctx, turnLock(id), id)
	if err != nil {
		return nil, nil, err
	}
	return lk, &v, nil
}

// startTurn takes the session's turn lock and registers a turn, or
// refuses it: errBusy while a turn of the session runs (in this process
// or another sharing the store) or the session is otherwise busy; it
// waits for a turn slot while MaxRunning turns run in this process
// (admission.go: 429 when it cannot wait), 503 while the server shuts
// down (unless queued: a queued prompt runs during the grace period).
func (s *Server) startTurn(ctx context.Context, id string, queued bool) (*turn, error) {
	s.mu.Lock()
	switch {
	case s.draining && !queued:
		s.mu.Unlock()
		return nil, errShuttingDown()
	case s.running[id] != nil:
		s.mu.Unlock()
		return nil, errBusy
	}
	if err := s.takeSlot(ctx, queued); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	// The wait for a slot may have let another prompt of the session
	// start its turn, or the server start shutting down.
	switch {
	case s.draining && !queued:
		s.starting--
		s.grantSlots()
		s.mu.Unlock()
		return nil, errShuttingDown()
	case s.running[id] != nil:
		s.starting--
		s.grantSlots()
		s.mu.Unlock()
		return nil, errBusy
	}
	s.mu.Unlock()
	lk, version, err := s.tryTurnLock(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting--
	switch {
	case errors.Is(err, sessions.ErrLocked):
		s.grantSlots()
		return nil, errBusy
	case err != nil:
		s.grantSlots()
		return nil, err
	case s.draining && !queued:
		s.grantSlots()
		lk.Unlock(context.WithoutCancel(ctx))
		return nil, errShuttingDown()
	}
	tctx, cancel := context.WithCancelCause(s.turnCtx)
	if d := s.cfg.TurnTimeout; d > 0 {
		tctx2, tcancel := context.WithTimeoutCause(tctx, d, fmt.Errorf("the turn exceeded its time limit of %s", d))
		parent := cancel
		tctx, cancel = tctx2, func(cause error) { parent(cause); tcancel() }
	}
	t := &turn{ctx: tctx, cancel: cancel, done: make(chan struct{}), stored: make(chan struct{}), lock: lk, version: version}
	s.running[id] = t
	s.turns.Add(1)
	s.metrics.turnsRunning.Inc()
	// Another request (here or in another process) may ask for the lock:
	// a cancel or a delete. The turn stops, and gives the lock up when it
	// has ended.
	go func() {
		select {
		case <-lk.Interrupted():
			t.cancel(interruptCause(lk.Reason()))
		case <-t.done:
		}
	}()
	return t, nil
}

// errBusy is startTurn's answer when the session's turn lock is held: a
// turn runs, here or in another process, or a delete, completion or the
// idle reaper holds it.
var errBusy = errors.New("the session's turn lock is held")

// releaseTurn unregisters a turn that startTurn registered but that
// never ran.
func (s *Server) releaseTurn(id string, t *turn) {
	s.metrics.turnsRunning.Dec()
	s.finishTurn(id, t)
}

// finishTurn unregisters a turn that has ended (and was counted as
// such) and gives its lock up; the session's next queued prompt, if any,
// starts.
func (s *Server) finishTurn(id string, t *turn) {
	t.cancel(nil)
	s.unlockTurn(t.lock)
	s.mu.Lock()
	delete(s.running, id)
	s.grantSlots()
	s.startQueued(id)
	s.mu.Unlock()
	close(t.done)
	s.turns.Done()
}

// runTurn runs one prompt on the agent and records how it ended: a
// failure makes the session "error"; a cancellation leaves it active.
// Either way the session is healed.
func (s *Server) runTurn(id, name string, ag Agent, text string, t *turn) {
	start := time.Now()
	err := ag.Handle(t.ctx, id, text)
	t.err = err
	bg := context.WithoutCancel(t.ctx)
	var limit *agent.TurnLimitError
	refused := errors.As(err, &limit) && t.ctx.Err() == nil
	select {
	case <-t.stored:
	default:
		if refused {
			// The agent's loop refused the prompt before storing it (a cap
			// the loop was given): nothing is stored, the prompt gets 409.
			break
		}
		// The agent ended without storing the prompt (it failed first, or
		// does not call agent_loop): store it, so that what is
		// acknowledged is kept.
		if _, serr := s.store.Apply(bg, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); serr != nil {
			s.log.Error("storing a prompt failed", "id", id, "err", serr)
		}
	}
	outcome := "done"
	switch {
	case refused:
		outcome = "turn_limit"
		s.log.Info("prompt refused: turn cap reached", "id", id, "agent", name, "cap", limit.Cap)
	case t.ctx.Err() != nil:
		outcome = "cancelled"
		if herr := s.store.Heal(bg, id, "cancelled"); herr != nil && !errors.Is(herr, sessions.ErrNotFound) {
			s.log.Error("healing a cancelled turn failed", "id", id, "err", herr)
		}
		if cause := context.Cause(t.ctx); !errors.Is(cause, errDeleted) {
			s.reactivate(bg, id, cause)
		}
	case err != nil:
		outcome = "error"
		s.log.Warn("turn failed", "id", id, "agent", name, "err", err)
		if eerr := s.end(bg, id, sessions.StatusError, "error", "The turn failed: "+err.Error()); eerr != nil && !errors.Is(eerr, sessions.ErrNotFound) {
			s.log.Error("recording a failed turn failed", "id", id, "err", eerr)
		}
	default:
		if herr := s.store.Heal(bg, id, "interrupted"); herr != nil && !errors.Is(herr, sessions.ErrNotFound) {
			s.log.Error("healing a turn failed", "id", id, "err", herr)
		}
	}
	s.metrics.turnDone(outcome, time.Since(start))
	s.finishTurn(id, t)
}

// errCancelRequested is the cancellation cause of POST .../cancel.
var errCancelRequested = errors.New("cancelled by request")

// cancelTurn handles POST /api/sessions/{id}/cancel: it stops the
// running turn (the session stays active) and answers 202, or 409 when
// no turn is running.
func (s *Server) cancelTurn(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := s.meta(r.Context(), id); err != nil {
		return err
	}
	held, err := s.locks.Interrupt(r.Context(), turnLock(id), reasonCancel)
	if err != nil {
		return err
	}
	if !held {
		return errorf(http.StatusConflict, "no_turn", "no turn of session '%s' is running", id)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"sessionId": id, "cancelled": true})
	return nil
}

// reactivate makes a session whose turn was cancelled (POST .../cancel,
// a turn timeout, a shutdown) active again: an agent loop marks its
// session cancelled when it is cancelled, but here only the turn was.
func (s *Server) reactivate(ctx context.Context, id string, cause error) {
	rec, err := s.store.Meta(ctx, id)
	if err != nil || rec.Status != sessions.StatusCancelled {
		return
	}
	reason := "turn cancelled"
	if cause != nil {
		reason += ": " + cause.Error()
	}
	ch := &sessions.Change{Status: sessions.StatusActive, Events: []sessions.Event{sessions.NewEvent(sessions.EventStatus,
		map[string]any{"status": string(sessions.StatusActive), "previous": string(rec.Status), metaReason: reason})}}
	if _, err := s.store.Apply(ctx, id, ch); err != nil && !errors.Is(err, sessions.ErrNotFound) {
		s.log.Error("reactivating a session after a cancelled turn failed", "id", id, "err", err)
	}
}
