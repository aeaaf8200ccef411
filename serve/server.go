package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/telemetry"
	"github.com/skein-dev/skein/workspace"
)

// Agent runs prompts. Handle runs one prompt, text, on session
// sessionID and returns when the turn is over; it is expected to append
// the prompt as a user message first (agent_loop does). Cancelling ctx
// must stop it promptly. Handle is called concurrently for different
// sessions, never for one session twice at once.
type Agent interface {
	Handle(ctx context.Context, sessionID, text string) error
}

// SessionAgent is an Agent that holds something of its own for each
// session it serves (an external ACP agent: a process and a session on
// it). The server opens a session on it when it creates one and closes
// it when the session ends.
type SessionAgent interface {
	Agent
	// Open prepares session id, just created, for its prompts. An error
	// fails the creation: the session is marked "error" with it.
	Open(ctx context.Context, id string) error
	// Close releases what session id holds: the session has ended
	// (cancelled, completed, error or purged). It must be quick to
	// return to the caller's request and safe for ids never opened.
	Close(id string)
}

// Binder is implemented by an agent whose sessions are bound to it (an
// agent file, `--agent NAME.agent.yaml`). Bind returns what a new
// session of the agent stores: metadata (the agent's frozen snapshot and
// the session context, given as the create request's context, nil when
// none) and the data of its session:started event (the agent, its model,
// fingerprint and context). An error refuses the create with 400 and its
// text.
type Binder interface {
	Bind(ctx context.Context, sessionContext map[string]any) (metadata, started map[string]any, err error)
}

// Defaults of Config.
const (
	DefaultMaxSessions  = 5
	DefaultIdleTimeout  = 30 * time.Minute
	DefaultMaxBodyBytes = 1 << 20
	DefaultSSEBuffer    = 256
	DefaultHeartbeat    = 15 * time.Second
)

// Config configures a Server. Zero fields get defaults.
type Config struct {
	// Store holds the sessions (required). A store whose backend is not
	// durable is made to refuse a session past its cap
	// (Store.RefuseWhenFull): a session pushed out of it would be lost.
	Store *sessions.Store
	// Agents are the agents sessions may use, by name (at least one).
	Agents map[string]Agent
	// Token is the bearer token /api and the viewer require (required:
	// use NewToken for a random one).
	Token string
	// MaxSessions bounds the served sessions that are active at once
	// (default DefaultMaxSessions).
	MaxSessions int
	// MaxRunning bounds the turns running at once (default
	// DefaultMaxRunning); a prompt past it waits for a turn to end
	// (see AdmissionWait).
	MaxRunning int
	// AdmissionWait bounds how long a prompt waits for a turn slot
	// before it is refused with 429 too_many_turns (default
	// MaxAdmissionWait).
	AdmissionWait time.Duration
	// TurnTimeout cancels a turn that runs longer (0: no limit).
	TurnTimeout time.Duration
	// MaxTurns is the turn cap of a session that has none of its own
	// (its agent's, or agent_session_open's max_turns); 0: no cap. A
	// prompt past a session's cap is refused with 409 turn_limit.
	MaxTurns int
	// IdleTimeout completes a served session with no activity for this
	// long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxStreams bounds the SSE streams open at once (default
	// DefaultMaxStreams); MaxStreamsPerClient bounds those of one client
	// address (default DefaultMaxStreamsPerClient). A stream past either
	// is refused with 429 too_many_streams.
	MaxStreams, MaxStreamsPerClient int
	// SSEBuffer is how many events an SSE client may fall behind before
	// it is disconnected (default DefaultSSEBuffer).
	SSEBuffer int
	// Heartbeat is the interval of SSE comment lines on a quiet stream
	// (default DefaultHeartbeat).
	Heartbeat time.Duration
	// PollInterval is how often the server looks for what other
	// processes sharing a durable store did (default
	// DefaultPollInterval): events they wrote, for the SSE streams of
	// this server; interrupts of this server's turns (a cancel or delete
	// sent to another replica); turns a dead process left behind.
	PollInterval time.Duration
	// NewID mints session ids (default: UUIDv7).
	NewID func() string
	// Tracer exports the turns' spans (nil: none); a prompt carrying a
	// W3C traceparent header continues that trace.
	Tracer *telemetry.Tracer
	// Logger receives one line per session change and failure (default:
	// discard). The token is never logged.
	Logger *slog.Logger
	// WorkspaceRoot is the directory every repository must lie in
	// (--workspace-root, AGENT_WORKSPACE_ROOT); "": no repository can be
	// registered.
	WorkspaceRoot string
	// Repos are repositories to register at start, id to directory (a
	// relative path is relative to WorkspaceRoot): a new id is created, a
	// registered id whose path differs gets the new path.
	Repos map[string]string
	// Workspace is the policy whose fs scope tier and allowlists a
	// session bound to a repository gets, rooted at the repository (nil:
	// sandboxed, no commands, no network).
	Workspace *workspace.Policy
}

// Server is the session API. Its Handler serves HTTP; Close stops its
// background work. Create one with New.
type Server struct {
	cfg      Config
	store    *sessions.Store
	log      *slog.Logger
	mux      *http.ServeMux
	hub      *hub
	streams  *streamCaps
	metrics  *metrics
	locks    sessions.Locker
	notifier sessions.Notifier // nil: the backend pushes no word of events
	repos    sessions.RepoBackend
	root     string // the workspace root, resolved ("": none)

	// turnCtx is the parent of every turn's context; cancelling it
	// cancels every running turn (shutdown after the grace period).
	turnCtx    context.Context
	cancelAll  context.CancelCauseFunc
	stopReaper func()
	stopPoller func()
	stopWatch  []func()

	createMu sync.Mutex // serialises this process's creations (see createCounted)

	mu       sync.Mutex
	running  map[string]*turn        // this process's running turns by session id
	queues   map[string]*promptQueue // prompts waiting for a turn, by session id
	starting int                     // turns between the MaxRunning check and their registration
	waiting  []*slotWaiter           // prompts waiting for a turn slot, first come first served
	draining bool                    // shutting down: no new turns
	turns    sync.WaitGroup
}

// New returns a server over cfg.Store. It scans the store for the
// served sessions that are active (they count against MaxSessions) and
// starts the idle reaper.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("serve: no session store")
	}
	if len(cfg.Agents) == 0 {
		return nil, errors.New("serve: no agents")
	}
	if cfg.Token == "" {
		return nil, errors.New("serve: no token")
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = DefaultMaxRunning(cfg.Store.Backend())
	}
	if cfg.AdmissionWait == 0 {
		cfg.AdmissionWait = MaxAdmissionWait
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerClient == 0 {
		cfg.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if cfg.SSEBuffer == 0 {
		cfg.SSEBuffer = DefaultSSEBuffer
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for name, v := range map[string]int{"max sessions": cfg.MaxSessions, "max running": cfg.MaxRunning, "SSE buffer": cfg.SSEBuffer, "max streams": cfg.MaxStreams, "max streams per client": cfg.MaxStreamsPerClient} {
		if v < 1 {
			return nil, fmt.Errorf("serve: %s must be >= 1, got %d", name, v)
		}
	}
	if cfg.MaxTurns < 0 {
		return nil, fmt.Errorf("serve: max turns must not be negative, got %d", cfg.MaxTurns)
	}
	if cfg.IdleTimeout < 0 || cfg.AdmissionWait < 0 || cfg.Heartbeat < 0 || cfg.MaxBodyBytes < 0 || cfg.PollInterval < 0 {
		return nil, errors.New("serve: idle timeout, heartbeat, poll interval and body limit must not be negative")
	}
	// A memory store refuses a session past its cap rather than lose one
	// (see errSessionCap), whichever request or turn creates it.
	cfg.Store.RefuseWhenFull()
	s := &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger, running: map[string]*turn{}, queues: map[string]*promptQueue{}}
	s.metrics = newMetrics()
	s.hub = newHub(cfg.SSEBuffer, s.metrics)
	s.streams = newStreamCaps(cfg.MaxStreams, cfg.MaxStreamsPerClient)
	s.turnCtx, s.cancelAll = context.WithCancelCause(telemetry.With(context.Background(), cfg.Tracer))
	locks, err := newLocker(cfg.Store, cfg.PollInterval)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.locks = locks
	if nb, ok := cfg.Store.Backend().(sessions.NotifierBackend); ok {
		if s.notifier, err = nb.NewNotifier(); err != nil {
			locks.Close()
			return nil, fmt.Errorf("serve: %w", err)
		}
		s.hub.watch = func(id string) func() {
			return s.notifier.Watch(id, func(seq int64) { s.notified(id, seq) })
		}
	}
	if err := s.openRepos(context.Background()); err != nil {
		s.closeShared()
		return nil, fmt.Errorf("serve: %w", err)
	}
	if err := s.healActive(context.Background()); err != nil {
		s.closeShared()
		return nil, fmt.Errorf("serve: reading the session store: %w", err)
	}
	s.stopWatch = []func(){s.store.Observe(s.observe), s.store.ObserveLogged(s.observeLogged)}
	s.routes()
	s.stopReaper = s.startReaper()
	s.stopPoller = s.startPoller()
	return s, nil
}

// localEventGrace is how long the word of a session's new events waits,
// while a turn of the session runs in this process, before it wakes the
// session's streams (see notified).
const localEventGrace = 20 * time.Millisecond

// notified takes the backend's word that session id's log in the store
// reaches seq. While a turn of the session runs in this process, the
// events are most likely its own, which reach the streams through the
// store's observer, and the word often comes first (it is sent at the
// commit, the observer runs after the commit returns): the streams are
// woken localEventGrace later, and only those still behind then read the
// events from the store.
func (s *Server) notified(id string, seq int64) {
	s.mu.Lock()
	local := s.running[id] != nil
	s.mu.Unlock()
	if local {
		time.AfterFunc(localEventGrace, func() { s.hub.wake(id, seq) })
		return
	}
	s.hub.wake(id, seq)
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s }

// observe is the store's observer of committed (and transient) events:
// it feeds the SSE hub and the metrics.
func (s *Server) observe(e sessions.Event) {
	s.hub.publish(e)
	s.metrics.observe(e)
	if e.Type == agent.EventSecurityDecision {
		s.log.Warn("security: refused", "session", e.SessionID, "decision", e.Data["decision"], "action", e.Data["action"],
			"rule", e.Data["rule"], "tool", e.Data["tool"], "reason", e.Data["reason"])
	}
}

// observeLogged is the store's observer of logged events: it tells a
// starting turn that its user message was logged, so the prompt can be
// committed and acknowledged without waiting for the agent's first
// commit (which follows the model call).
func (s *Server) observeLogged(e sessions.Event) {
	if e.Type != sessions.EventMessage || e.Data["role"] != message.RoleUser {
		return
	}
	s.mu.Lock()
	if t := s.running[e.SessionID]; t != nil {
		t.userStored(e)
	}
	s.mu.Unlock()
}

// Shutdown stops new turns, waits for the running ones up to ctx's
// deadline, then cancels those still running and waits for them to end
// (each heals its session). It also stops the idle reaper and ends every
// SSE stream. The HTTP server itself is shut down by the caller.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.refuseWaiting()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.turns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelAll(errShutdown)
		<-done
		err = ctx.Err()
	}
	s.Close()
	return err
}

// errShutdown is the cancellation cause of turns still running when the
// grace period of a shutdown ends.
var errShutdown = errors.New("the server is shutting down")

// Close cancels every running turn, waits for them, and stops the idle
// reaper, the store observer and the SSE streams.
func (s *Server) Close() {
	s.mu.Lock()
	s.refuseWaiting()
	s.mu.Unlock()
	s.cancelAll(errShutdown)
	s.turns.Wait()
	s.stopReaper()
	s.stopPoller()
	for _, stop := range s.stopWatch {
		stop()
	}
	s.hub.closeAll()
	s.closeShared()
}

// closeShared releases the server's locks and stops its notifier.
func (s *Server) closeShared() {
	if err := s.locks.Close(); err != nil {
		s.log.Error("releasing locks failed", "err", err)
	}
	if s.notifier != nil {
		s.notifier.Close()
	}
}

// healActive heals the stored served sessions whose status is active
// and whose turn lock is free: a turn that a stopped server did not
// finish may have left tool calls without results, which it closes, so
// that every read shows a valid transcript. (A session whose turn lock
// is held has a turn running in another process.) It counts the active
// sessions for the metrics.
func (s *Server) healActive(ctx context.Context) error {
	list, _, err := s.store.Backend().List(ctx, sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}})
	if err != nil {
		return err
	}
	n := 0
	for _, sum := range list {
		if strOf(sum.Metadata, metaAgent) == "" {
			continue
		}
		n++
		lk, err := s.locks.TryLock(ctx, turnLock(sum.ID))
		if errors.Is(err, sessions.ErrLocked) {
			continue
		}
		if err != nil {
			return err
		}
		err = s.store.Heal(ctx, sum.ID, "interrupted")
		s.unlock(lk)
		if err != nil && !errors.Is(err, sessions.ErrNotFound) {
			return err
		}
	}
	s.metrics.sessionsActive.Set(float64(n))
	return nil
}
