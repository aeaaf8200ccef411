package sessions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
)

// DefaultCap is the default number of live sessions a Store holds.
const DefaultCap = 128

// Store holds the live sessions of one VM in an LRU over a Backend.
//
// Recency: operations that write (Open of an existing id, Apply, Fork for
// both sessions, Subscribe, QueueFeedback, Messages for an agent loop)
// refresh a session; reads (Exists, Length, Snapshot, Ancestry,
// Subscribers) do not. With a durable backend a session that left the LRU
// is reloaded on its next use; otherwise it is gone.
//
// A Store is safe for concurrent use.
type Store struct {
	backend  Backend
	clock    func() time.Time
	newID    func() string
	cap      int
	redactor *message.Redactor

	// ids are the per-session locks held for a session's backend I/O
	// (see idlock.go).
	ids idLocks

	mu  sync.Mutex // guards every change of the LRU; never held across I/O
	lru *lru.Cache[string, *Session]
	// removing is set (under mu) while a session leaves the LRU on
	// purpose (remove) rather than to make room.
	removing bool
	// leaving are the durable sessions pushed out of the LRU whose
	// staged changes are not committed yet (see settle).
	leaving departures
	pins    pinSet
	full    fullGuard

	sink EventSink // nil: none

	// lost holds, by session id, the error of committing the staged
	// changes of a session evicted from the LRU: its next Commit
	// reports it.
	lostMu sync.Mutex
	lost   map[string]error

	observers observers
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock used for timestamps (default time.Now).
func WithClock(clock func() time.Time) Option { return func(s *Store) { s.clock = clock } }

// WithIDs sets the source of message ids (default: a random UUIDv7 per
// message). A VM passes its own id source, so a test's ids are
// reproducible.
func WithIDs(newID func() string) Option { return func(s *Store) { s.newID = newID } }

// WithCap sets the LRU capacity (default DefaultCap).
func WithCap(n int) Option { return func(s *Store) { s.cap = n } }

// WithEventSink makes the store hand every event it logs to sink, as it
// logs it (see EventSink).
func WithEventSink(sink EventSink) Option { return func(s *Store) { s.sink = sink } }

// EventSink receives the events a Store logs, for a live event log. It
// differs from an observer (Store.ObserveLogged) in what it gets with
// the events: the messages the write appended and the session's state.
type EventSink interface {
	// Logged is called after each write that logged events, with the
	// session's state after the write (without messages and events, not
	// to be kept or modified past the call), the events in order, and the
	// messages the write appended (the k'th "message" event appended
	// appended[k]). Calls for one session come in the order of its log,
	// while the store holds the session's lock: Logged must not call the
	// store back about that session.
	Logged(rec *Record, events []Event, appended []message.Message)
}

// logged hands a write's events to the sink, if any. The caller holds
// sess.mu.
func (s *Store) logged(sess *Session, events []Event, appended []message.Message) {
	if s.sink == nil || len(events) == 0 {
		return
	}
	meta := cloneRecordMeta(&sess.rec)
	s.sink.Logged(&meta, events, appended)
}

// WithRedactor sets the message.Redactor applied to every message appended and
// every event logged (default: a fresh one, see Store.Redactor).
func WithRedactor(r *message.Redactor) Option { return func(s *Store) { s.redactor = r } }

// Forgetter is implemented by non-durable backends that can drop a session
// without touching its forks, which is what eviction from the LRU needs.
type Forgetter interface {
	Forget(id string)
}

// NewStore returns a store over backend.
func NewStore(backend Backend, opts ...Option) (*Store, error) {
	s := &Store{backend: backend, clock: time.Now, newID: NewMessageID, cap: DefaultCap}
	for _, o := range opts {
		o(s)
	}
	if s.redactor == nil {
		s.redactor = message.NewRedactor()
	}
	if s.cap < 1 {
		return nil, fmt.Errorf("session cap must be >= 1, got %d", s.cap)
	}
	cache, err := lru.NewWithEvict(s.cap, s.onEvict)
	if err != nil {
		return nil, err
	}
	s.lru = cache
	return s, nil
}

// Redactor returns the store's Redactor: the secrets added to it are
// replaced by "<secret NAME>" in every message appended and every event
// logged, before they reach the backend, snapshots and exports.
func (s *Store) Redactor() *message.Redactor { return s.redactor }

// Backend returns the store's backend.
func (s *Store) Backend() Backend { return s.backend }

// Cap returns the LRU capacity.
func (s *Store) Cap() int { return s.cap }

// Now returns the store clock's current time.
func (s *Store) Now() time.Time { return s.clock() }

// onEvict is called, with s.mu held, for each session leaving the LRU.
func (s *Store) onEvict(id string, sess *Session) {
	if !s.removing && s.hold(id, sess) {
		return // pinned: live until unpinned
	}
	if s.backend.Durable() {
		// Staged changes go to the backend before the session leaves,
		// after s.mu is released (settle, depart).
		s.leave(id, sess)
		return
	}
	sess.mu.Lock()
	sess.evicted = true
	sess.mu.Unlock()
	if f, ok := s.backend.(Forgetter); ok {
		f.Forget(id)
		return
	}
	_ = s.backend.Delete(context.Background(), id, false)
}

// Error is an error about one session. Its message reads
// "unknown session id 'x'", "session 'x' already exists", and so on; the
// builtins prefix it with their name.
type Error struct {
	ID  string
	Err error
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotFound):
		return fmt.Sprintf("unknown session id '%s'", e.ID)
	case errors.Is(e.Err, ErrExists):
		return fmt.Sprintf("session '%s' already exists", e.ID)
	case errors.Is(e.Err, ErrConflict):
		return fmt.Sprintf("session '%s' was modified by another process (reopen it with agent_session_open to continue)", e.ID)
	case errors.Is(e.Err, ErrHasChildren):
		return fmt.Sprintf("session '%s' has forks", e.ID)
	}
	return fmt.Sprintf("session '%s': %v", e.ID, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// IDError returns err as an error about session id: an *Error, unless err
// is nil or already one (whose id is kept). Backends wrap their errors
// with it, so the session id appears in a message exactly once however
// many layers pass the error on.
func IDError(id string, err error) error { return wrap(id, err) }

func wrap(id string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{ID: id, Err: err}
}

// get returns the live session for a write, refreshing its recency and
// loading it from a durable backend when it is not live. A cold load
// holds the session's id lock only: loads of other sessions overlap.
func (s *Store) get(ctx context.Context, id string) (*Session, error) {
	if sess, ok := s.lru.Get(id); ok {
		return sess, nil
	}
	unlock, err := s.ids.lock(ctx, id)
	if err != nil {
		return nil, wrap(id, err)
	}
	sess, err := s.getLocked(ctx, id)
	unlock()
	s.settle()
	return sess, err
}

// resident returns the session id if it is live for a write: in the LRU
// (refreshed), pinned, or leaving the LRU (put back). The caller holds
// the id lock of id.
func (s *Store) resident(id string) (*Session, bool) {
	if sess, ok := s.lru.Get(id); ok {
		return sess, true
	}
	if sess, ok := s.held(id); ok {
		return sess, true
	}
	return s.revive(id)
}

// getLocked is get for a caller holding the id lock of id.
func (s *Store) getLocked(ctx context.Context, id string) (*Session, error) {
	if sess, ok := s.resident(id); ok {
		return sess, nil
	}
	if !s.backend.Durable() {
		return nil, wrap(id, ErrNotFound)
	}
	sess, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.heal(ctx, sess, "interrupted"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lru.Add(id, sess)
	s.mu.Unlock()
	return sess, nil
}

// load reads a stored session for the LRU: without its event log when
// the backend is a PartialLoader.
func (s *Store) load(ctx context.Context, id string) (*Session, error) {
	if pl, ok := s.backend.(PartialLoader); ok {
		rec, lastSeq, err := pl.LoadTranscript(ctx, id)
		if err != nil {
			return nil, wrap(id, err)
		}
		return resumedSession(rec, lastSeq), nil
	}
	rec, err := s.backend.Load(ctx, id)
	if err != nil {
		return nil, wrap(id, err)
	}
	return newSession(rec), nil
}

// peek returns the live session without refreshing it, or the stored
// record of a durable session that is not live: with its event log when
// withLog is set (otherwise the record's Events may be nil).
func (s *Store) peek(ctx context.Context, id string, withLog bool) (*Session, *Record, error) {
	if sess, ok := s.live(id); ok {
		return sess, nil, nil
	}
	if !s.backend.Durable() {
		return nil, nil, wrap(id, ErrNotFound)
	}
	var rec *Record
	var err error
	if pl, ok := s.backend.(PartialLoader); ok && !withLog {
		rec, _, err = pl.LoadTranscript(ctx, id)
	} else {
		rec, err = s.backend.Load(ctx, id)
	}
	if err != nil {
		return nil, nil, wrap(id, err)
	}
	return nil, rec, nil
}

// record returns a copy of the live session's state, reading its event
// log from the backend first if it was resumed without it. Events of the
// stored log newer than the live copy (written by another process, which
// makes the live copy stale) are left out, so the copy is consistent.
func (s *Store) record(ctx context.Context, sess *Session) (*Record, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.logLoaded {
		return sess.record(), nil
	}
	events, err := s.backend.(PartialLoader).LoadEvents(ctx, sess.rec.ID)
	if err != nil {
		return nil, wrap(sess.rec.ID, err)
	}
	n := len(events)
	for n > 0 && events[n-1].Seq > sess.lastSeq {
		n--
	}
	// The staged events are not in the backend yet.
	for _, ch := range sess.staged {
		events = append(events[:n:n], ch.Events...)
		n = len(events)
	}
	// The copy gets the log; the session does not keep it (see shed).
	rec := sess.record()
	rec.Events = events[:n:n]
	return rec, nil
}

// shed drops the event log that a new live session holds when the
// backend can load it (a PartialLoader): the log then lives in the
// backend only, and a snapshot reads it from there, so a long session
// does not hold every event twice (memory) or in memory at all (SQLite).
// The caller holds sess.mu or is its only user.
func (s *Store) shed(sess *Session) *Session {
	if _, ok := s.backend.(PartialLoader); ok {
		sess.rec.Events, sess.logLoaded = nil, false
	}
	return sess
}

// Open resumes id if it is live or stored, or creates it empty; either
// way the session is active after it. maxTurns > 0 sets the session's
// turn cap. It reports whether it created the session and what a loop on
// it needs to know (its turns and cap), so no second read is needed.
func (s *Store) Open(ctx context.Context, id string, maxTurns int) (Opened, error) {
	return s.OpenWith(ctx, id, OpenOptions{MaxTurns: maxTurns})
}

// Opened is what Store.Open did and found.
type Opened struct {
	Created  bool // the open created the session
	Turns    int  // the session's turns so far
	MaxTurns int  // the session's own turn cap (0: none)
}

// opened reports on sess after an open.
func opened(sess *Session, created bool) Opened {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return Opened{Created: created, Turns: sess.rec.Turns, MaxTurns: sess.rec.MaxTurns}
}

// OpenOptions are the settings of Store.OpenWith.
type OpenOptions struct {
	// MaxTurns > 0 sets the session's turn cap.
	MaxTurns int
	// Info, when it sets anything, is the title and metadata of a new
	// session, or an update of a resumed one (see Store.SetInfo).
	Info Info
}

// Info is an update of a session's title and metadata: a nil Title keeps
// the title ("" clears it); the keys of Metadata replace the session's
// keys of the same name, the others stay.
type Info struct {
	Title    *string
	Metadata map[string]any
	// Started is the data of the session:started event of a new
	// session; a resume ignores it.
	Started Started
}

func (in Info) empty() bool { return in.Title == nil && in.Metadata == nil }

// Started is the data of the session:started event logged when a
// session is created (an agent binding's agent, model, fingerprint and
// context, say; nil: none), in Info and ForkOptions. A session that is
// resumed, loaded or imported is not started again.
type Started = map[string]any

// check validates the metadata's values.
func (in Info) check() error { return CheckMetadata(in.Metadata) }

// OpenWith is Open with a title and metadata: set on a new session, merged
// into a resumed one. It reports as Open does. Open is
// create-or-resume whatever else opens the id at the same time, in this
// process or another on the same storage: a create that finds the id
// taken resumes it, and a resume that loses a write race starts over.
func (s *Store) OpenWith(ctx context.Context, id string, opts OpenOptions) (Opened, error) {
	if err := opts.Info.check(); err != nil {
		return Opened{}, err
	}
	for attempt := 1; ; attempt++ {
		created, err := s.openOnce(ctx, id, opts)
		if attempt < openAttempts && (errors.Is(err, ErrExists) || errors.Is(err, ErrConflict) || errors.Is(err, errChanged)) ||
			errors.Is(err, errEvicted) {
			continue // another opener won a race: resume what it left
		}
		return created, err
	}
}

// openOnce is one attempt of OpenWith.
func (s *Store) openOnce(ctx context.Context, id string, opts OpenOptions) (Opened, error) {
	sess, err := s.get(ctx, id)
	if err == nil {
		sess.mu.Lock()
		status, version := sess.rec.Status, sess.rec.Version
		ch := infoChange(&sess.rec, opts.Info)
		sess.mu.Unlock()
		ch.MaxTurns = opts.MaxTurns
		if status != StatusActive {
			ch.Status = StatusActive
			ch.Events = append(ch.Events, Event{Type: EventStatus, Data: map[string]any{"status": string(StatusActive), "previous": string(status)}})
		}
		if ch.MaxTurns > 0 || ch.Status != "" || len(ch.Events) > 0 {
			if _, err = s.apply(ctx, sess, ch, version, false, nil); err != nil {
				return Opened{}, err
			}
		}
		return opened(sess, false), nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Opened{}, err
	}
	unlock, err := s.ids.lock(ctx, id)
	if err != nil {
		return Opened{}, wrap(id, err)
	}
	defer s.settle()
	defer unlock()
	if sess, ok := s.resident(id); ok {
		return opened(sess, false), nil // created concurrently
	}
	if err := s.create(ctx, id, opts.MaxTurns, opts.Info); err != nil {
		return Opened{}, err
	}
	return Opened{Created: true, MaxTurns: opts.MaxTurns}, nil
}

// create stores a new session and makes it live. The caller holds the
// id lock of id.
// Every new id is checked here (CheckID), whichever call names it.
func (s *Store) create(ctx context.Context, id string, maxTurns int, info Info) error {
	if err := CheckID(id); err != nil {
		return err
	}
	reserved, err := s.reserve(id)
	if err != nil {
		return err
	}
	now := s.clock()
	rec := &Record{ID: id, Status: StatusActive, CreatedAt: now, UpdatedAt: now, MaxTurns: maxTurns,
		Metadata: MergeMetadata(nil, info.Metadata)}
	if info.Title != nil {
		rec.Title = *info.Title
	}
	sess := newSession(rec)
	rec.Events = sess.stamp([]Event{s.startedEvent(info.Started)}, now)
	if err := s.backend.Create(ctx, rec); err != nil {
		s.unreserve(reserved)
		return wrap(id, err)
	}
	sess.rec.Events, sess.lastSeq = rec.Events, rec.Events[0].Seq
	s.notifyCreated(sess, rec.Events)
	s.mu.Lock()
	s.lru.Add(id, sess)
	s.added(reserved)
	s.mu.Unlock()
	return nil
}

// startedEvent is the session:started event of a new session, with
// data (redacted; nil: none).
func (s *Store) startedEvent(data Started) Event {
	e := Event{Type: EventSessionStarted}
	if len(data) > 0 {
		e.Data, _ = s.redactor.RedactValue(maps.Clone(data)).(map[string]any)
	}
	return e
}

// notifyCreated hands the events a new session was stored with to the
// sink and the observers, and sheds its log (see shed).
func (s *Store) notifyCreated(sess *Session, events []Event) {
	sess.mu.Lock()
	s.logged(sess, events, nil)
	s.shed(sess)
	sess.mu.Unlock()
	s.observers.notify(events, true)
	s.observers.notify(events, false)
}

// Exists reports whether id is live or stored.
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	if _, ok := s.live(id); ok {
		return true, nil
	}
	if !s.backend.Durable() {
		return false, nil
	}
	return s.backend.Exists(ctx, id)
}

// Length returns the session's message count.
func (s *Store) Length(ctx context.Context, id string) (int, error) {
	sess, rec, err := s.peek(ctx, id, false)
	if err != nil {
		return 0, err
	}
	if sess != nil {
		return sess.length(), nil
	}
	return len(rec.Messages), nil
}

// Snapshot returns a copy of the session's state. Its Messages share the
// immutable message values with the store; everything else is copied.
func (s *Store) Snapshot(ctx context.Context, id string) (*Record, error) {
	sess, rec, err := s.peek(ctx, id, true)
	if err != nil {
		return nil, err
	}
	if sess != nil {
		return s.record(ctx, sess)
	}
	return rec, nil
}

// Metadata returns the session's metadata (nil when it has none) without
// refreshing recency: a read. The caller must not modify it (a change
// replaces the map, it never edits it).
func (s *Store) Metadata(ctx context.Context, id string) (map[string]any, error) {
	sess, rec, err := s.peek(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		return sess.rec.Metadata, nil
	}
	return rec.Metadata, nil
}

// ReadMessages returns the session's current messages, without its event
// log (which a live session does not hold: see shed) and without
// refreshing recency: a read. The caller must not modify them.
func (s *Store) ReadMessages(ctx context.Context, id string) ([]message.Message, error) {
	sess, rec, err := s.peek(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if sess != nil {
		return sess.messages(), nil
	}
	return rec.Messages, nil
}

// Messages returns the current message list for a write (an agent loop
// about to extend it), refreshing recency. The caller must not modify it.
func (s *Store) Messages(ctx context.Context, id string) ([]message.Message, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return sess.messages(), nil
}

// Apply validates ch against the session's current state, writes it to
// the backend and then applies it in memory. Appended messages get a
// "message" event each. It returns the events it logged (sequenced and
// stamped), in order, for delivery to subscribers. On error nothing
// changed.
func (s *Store) Apply(ctx context.Context, id string, ch *Change) ([]Event, error) {
	return s.write(ctx, id, ch, anyVersion, false, nil)
}

// write gets session id and applies ch to it (see apply), again on the
// reloaded session when the copy it got left the LRU before the change
// reached it: a durable session's changes always go to its live copy.
func (s *Store) write(ctx context.Context, id string, ch *Change, expect int64, stage bool, run *runWrite) ([]Event, error) {
	for {
		sess, err := s.get(ctx, id)
		if err != nil {
			return nil, err
		}
		events, err := s.apply(ctx, sess, ch, expect, stage, run)
		if !errors.Is(err, errEvicted) {
			return events, err
		}
	}
}

// Update computes a change from the session's current messages and
// applies it. fn runs without any lock held (it may call back into the
// store, run a model or a Starlark callback); if the session changed
// meanwhile, Update fails instead of applying a stale change. fn may
// return a nil change to write nothing.
func (s *Store) Update(ctx context.Context, id string, fn func(message.View) (*Change, error)) ([]Event, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	sess.mu.Lock()
	view := sess.transcript.Fork()
	version := sess.rec.Version
	sess.mu.Unlock()
	ch, err := fn(view)
	if err != nil || ch == nil {
		return nil, err
	}
	// A reloaded copy has the same version unless the session changed.
	return s.write(ctx, id, ch, version, false, nil)
}

// redact returns ch with the store's secrets redacted from its appended
// messages and its events' data: ch itself when there is nothing to do,
// else a copy (the caller's slices are not changed).
func (s *Store) redact(ch *Change) *Change {
	if s.redactor.Empty() || (len(ch.Append) == 0 && len(ch.Events) == 0) {
		return ch
	}
	w := *ch
	if len(ch.Append) > 0 {
		w.Append = make([]message.Message, len(ch.Append))
		for i, m := range ch.Append {
			w.Append[i] = s.redactor.RedactMessage(m)
		}
	}
	if len(ch.Events) > 0 {
		w.Events = slices.Clone(ch.Events)
		for i := range w.Events {
			if w.Events[i].Data != nil {
				w.Events[i].Data, _ = s.redactor.RedactValue(w.Events[i].Data).(map[string]any)
			}
		}
	}
	return &w
}

// identify gives every message that ch appends or puts in place without
// an ID a new one from the store's id source, and the write's time now
// (in UTC) when it has no CreatedAt. It sets them in the caller's change orig too
// (ch is orig or its redacted copy), so the caller sees the ids its
// messages got. Kept messages of a Replace already have theirs.
func (s *Store) identify(orig, ch *Change, now time.Time) {
	now = now.UTC() // as every backend gives it back
	for i := range orig.Append {
		m := &orig.Append[i]
		if m.ID == "" {
			m.ID = s.newID()
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		if ch != orig {
			ch.Append[i].ID, ch.Append[i].CreatedAt = m.ID, m.CreatedAt
		}
	}
	for i := range ch.ReplaceWith { // never redacted: ch's is orig's
		m := &ch.ReplaceWith[i]
		if m.ID == "" {
			m.ID = s.newID()
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
	}
}

// anyVersion makes apply skip its in-memory version check.
const anyVersion = -1

// errChanged is apply's refusal of a change computed from a version of
// the live session that another caller has replaced meanwhile.
var errChanged = errors.New("changed while the update was being computed")

// errEvicted is apply's refusal of a change to a durable session's copy
// that has left the LRU (its staged changes committed): the change goes
// to the session reloaded (see write).
var errEvicted = errors.New("left the store's cache")

// openAttempts bounds how often OpenWith starts over after losing a race
// with another opener (a create that finds the id taken, a resume whose
// version was replaced).
const openAttempts = 8

// apply validates ch, stamps its events and applies it: staged (see
// Stage) when stage is set, otherwise written to the backend together
// with the session's staged changes, in one Write.
func (s *Store) apply(ctx context.Context, sess *Session, ch *Change, expect int64, stage bool, run *runWrite) ([]Event, error) {
	stale := false
	defer func() {
		// Another process wrote the session: this live copy is stale.
		// Drop it (after unlocking it) so the next use reloads it. A
		// session being loaded (get heals it, holding s.mu, before it
		// enters the LRU) is not live: there is nothing to drop, and
		// forget would wait for s.mu forever.
		if cur, ok := s.live(sess.rec.ID); stale && ok && cur == sess {
			s.forget(sess.rec.ID, sess)
		}
	}()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	id := sess.rec.ID
	if sess.evicted && !s.backend.Durable() {
		return nil, wrap(id, ErrNotFound)
	}
	if sess.evicted {
		return nil, errEvicted
	}
	if expect != anyVersion && expect != sess.rec.Version {
		return nil, fmt.Errorf("session '%s' %w", id, errChanged)
	}
	orig := ch
	ch = s.redact(ch)
	if err := checkChange(&sess.transcript, ch); err != nil {
		return nil, err
	}
	now := s.clock()
	s.identify(orig, ch, now)
	w := *ch
	w.UpdatedAt = now
	if p := sess.firstPromptAfter(ch); p != sess.rec.FirstPrompt {
		w.SetFirstPrompt, w.FirstPrompt = true, p
	}
	events := make([]Event, 0, len(ch.Append)+len(ch.Events))
	base := sess.transcript.Len()
	if ch.Replace {
		base = len(ch.ReplaceWith)
	} else {
		base -= ch.DropFirst + ch.DropLast
	}
	for i, m := range ch.Append {
		data := map[string]any{"index": int64(base + i), "role": m.Role}
		ev := Event{Type: EventMessage, Data: data}
		if m.Role == message.RoleTool {
			ev.CorrID = m.ToolCallID
		}
		events = append(events, ev)
	}
	events = append(events, ch.Events...)
	for i := range events {
		if err := CheckEvent(&events[i]); err != nil {
			return nil, err
		}
	}
	w.Events = sess.stamp(events, now)
	if stage {
		sess.staged = append(sess.staged, &w)
	} else {
		changes := append(sess.staged[:len(sess.staged):len(sess.staged)], &w)
		if err := s.writeBackend(ctx, id, sess.storedVersion(), run, changes); err != nil {
			stale = errors.Is(err, ErrConflict)
			return nil, err
		}
		s.observers.committed(sess.staged)
		sess.staged = nil
	}

	sess.applied(&w)
	sess.promptChecked = true
	s.logged(sess, w.Events, w.Append)
	s.observers.notify(w.Events, true)
	if !stage {
		s.observers.committed([]*Change{&w})
	}
	return w.Events, nil
}

// checkChange validates the message edits of ch against t.
func checkChange(t *message.Transcript, ch *Change) error {
	var base message.View = t
	switch {
	case ch.Replace:
		view := &extended{base: message.Transcript{}}
		for i := range ch.ReplaceWith {
			if err := message.CheckAppend(view, &ch.ReplaceWith[i]); err != nil {
				return fmt.Errorf("replacement message %d: %v", i, err)
			}
			view.extra = append(view.extra, ch.ReplaceWith[i])
		}
		base = view
	case ch.DropFirst > 0 && ch.DropLast > 0:
		return fmt.Errorf("cannot drop messages from both ends in one write")
	case ch.DropFirst > 0:
		if ch.DropFirst > t.Len() {
			return fmt.Errorf("cannot drop %d of %d messages", ch.DropFirst, t.Len())
		}
		if ch.DropFirst < t.Len() && t.At(ch.DropFirst).Role == message.RoleTool {
			return fmt.Errorf("dropping %d messages would separate a tool result from its call", ch.DropFirst)
		}
		base = &dropped{base: t, drop: ch.DropFirst}
	case ch.DropLast > 0:
		if ch.DropLast > t.Len() {
			return fmt.Errorf("cannot drop the last %d of %d messages", ch.DropLast, t.Len())
		}
		base = t.Head(t.Len() - ch.DropLast)
	}
	if ch.SetMetadata {
		if err := CheckMetadata(ch.Metadata); err != nil {
			return err
		}
	}
	// The first appended message is checked against base itself; an
	// extended view is built only for the ones after it.
	view, ext := base, (*extended)(nil)
	for i := range ch.Append {
		m := &ch.Append[i]
		if err := message.CheckAppend(view, m); err != nil {
			return err
		}
		if err := message.CheckValues(m); err != nil {
			return fmt.Errorf("message %d: %w", base.Len()+i, err)
		}
		if i < len(ch.Append)-1 {
			if ext == nil {
				ext = &extended{base: base}
				view = ext
			}
			ext.extra = append(ext.extra, *m)
		}
	}
	if ch.Status != "" && !ch.Status.Valid() {
		return fmt.Errorf("unknown status '%s'", Escape(string(ch.Status)))
	}
	return nil
}

// extended is base followed by extra: a view of a transcript as it would
// be after an append, without building it.
type extended struct {
	base  message.View
	extra []message.Message
}

func (v *extended) Len() int { return v.base.Len() + len(v.extra) }

func (v *extended) At(i int) *message.Message {
	if n := v.base.Len(); i >= n {
		return &v.extra[i-n]
	}
	return v.base.At(i)
}

// dropped is base without its first drop messages.
type dropped struct {
	base message.View
	drop int
}

func (v *dropped) Len() int                  { return v.base.Len() - v.drop }
func (v *dropped) At(i int) *message.Message { return v.base.At(i + v.drop) }

// forget removes sess from the LRU if it is still the live copy of id.
func (s *Store) forget(id string, sess *Session) {
	s.drop(id, sess)
}

// drop removes session id from the LRU on purpose (closed, deleted,
// unloaded, stale), pinned or not, and commits its staged changes; when
// only is not nil, only if it is the live copy. It takes the id lock.
func (s *Store) drop(id string, only *Session) {
	unlock, _ := s.ids.lock(context.Background(), id)
	defer unlock()
	s.dropLocked(id, only)
}

// dropLocked is drop for a caller holding the id lock of id.
func (s *Store) dropLocked(id string, only *Session) {
	s.mu.Lock()
	if cur, ok := s.live(id); ok && (only == nil || cur == only) {
		s.remove(id)
	}
	s.mu.Unlock()
	s.depart(id)
}

// Heal closes tool calls left without results at the end of the session's
// transcript with error results whose content is reason ("cancelled",
// "interrupted"), and logs a "healed" event. It does nothing when no call
// is open.
func (s *Store) Heal(ctx context.Context, id, reason string) error {
	for {
		sess, err := s.get(ctx, id)
		if err != nil {
			return err
		}
		if err := s.heal(ctx, sess, reason); !errors.Is(err, errEvicted) {
			return err
		}
	}
}

func (s *Store) heal(ctx context.Context, sess *Session, reason string) error {
	sess.mu.Lock()
	t := sess.transcript
	sess.mu.Unlock()
	open := message.OpenToolCalls(t)
	if len(open) == 0 {
		return nil
	}
	names := map[string]string{}
	for i := t.Len() - 1; i >= 0; i-- {
		if m := t.At(i); m.HasToolCalls() {
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
			}
			break
		}
	}
	ch := &Change{}
	ids := make([]any, len(open))
	for i, callID := range open {
		ch.Append = append(ch.Append, message.Message{Role: message.RoleTool, ToolCallID: callID, Name: names[callID], IsError: true, Text: reason})
		ids[i] = callID
	}
	ch.Events = []Event{{Type: EventHealed, Data: map[string]any{"tool_call_ids": ids, "reason": reason}}}
	_, err := s.apply(ctx, sess, ch, anyVersion, false, nil)
	return err
}

// ForkOptions describes a fork for Store.Fork.
type ForkOptions struct {
	// KeepFirst is the number of messages the child keeps; -1 keeps all.
	KeepFirst int
	// BranchedAt records KeepFirst on the child (agent_session_fork_at).
	BranchedAt bool
	// Started is the data of the child's session:started event, to which
	// the fork adds parent_id.
	Started Started
}

// Fork creates dst as a child of src sharing src's messages (all, or the
// first KeepFirst). It refreshes src before inserting dst, so a fork never
// evicts its own source. It returns the fork event logged on src.
func (s *Store) Fork(ctx context.Context, src, dst string, opts ForkOptions) ([]Event, error) {
	if err := CheckID(dst); err != nil {
		return nil, err
	}
	for {
		events, err := s.forkOnce(ctx, src, dst, opts)
		if !errors.Is(err, errEvicted) {
			return events, err
		}
	}
}

// forkOnce is Fork from the live copy of src, errEvicted if that copy
// left the LRU before the fork reached it.
func (s *Store) forkOnce(ctx context.Context, src, dst string, opts ForkOptions) ([]Event, error) {
	parent, err := s.get(ctx, src)
	if err != nil {
		return nil, err
	}
	unlock, err := s.ids.lock(ctx, dst)
	if err != nil {
		return nil, wrap(dst, err)
	}
	// A stale source is dropped once dst's id lock is released (a
	// goroutine holds one id lock at a time).
	stale := false
	defer func() {
		if stale {
			s.forget(src, parent)
		}
		s.settle()
	}()
	defer unlock()
	if ok, err := s.Exists(ctx, dst); err != nil {
		return nil, wrap(dst, err)
	} else if ok {
		return nil, wrap(dst, ErrExists)
	}
	reserved, err := s.reserve(dst)
	if err != nil {
		return nil, err
	}
	created := false
	defer func() {
		if !created {
			s.unreserve(reserved)
		}
	}()
	now := s.clock()
	parent.mu.Lock()
	if parent.evicted {
		parent.mu.Unlock()
		return nil, errEvicted
	}
	n := parent.transcript.Len()
	keep := opts.KeepFirst
	if keep < 0 {
		keep = n
	}
	if keep > n {
		parent.mu.Unlock()
		return nil, fmt.Errorf("'keep_first' is %d but session '%s' has only %d messages", keep, src, n)
	}
	if open := message.OpenToolCalls(parent.transcript.Head(keep)); len(open) > 0 && keep < n {
		parent.mu.Unlock()
		for i := range open {
			open[i] = "'" + Escape(open[i]) + "'"
		}
		return nil, fmt.Errorf("keeping the first %d messages of session '%s' would cut tool calls %s from their results", keep, src, strings.Join(open, ", "))
	}
	// The backend forks the stored source: its staged changes first.
	if stale, err = s.commitLocked(ctx, parent); err != nil {
		parent.mu.Unlock()
		return nil, err
	}
	child := &Record{ID: dst, Status: StatusActive, CreatedAt: now, UpdatedAt: now,
		Metadata:    MergeMetadata(parent.rec.Metadata, map[string]any{"parent_session_id": src}),
		FirstPrompt: FirstPrompt(parent.transcript.Head(keep)), ParentID: src, MaxTurns: parent.rec.MaxTurns}
	if opts.BranchedAt {
		child.BranchedAt = &keep
	}
	if keep == n {
		child.Summary = cloneString(parent.rec.Summary)
	}
	childSess := newSession(child)
	childSess.transcript = parent.transcript.Head(keep)
	started := maps.Clone(opts.Started)
	if started == nil {
		started = Started{}
	}
	started["parent_id"] = src
	childSess.rec.Events = childSess.stamp([]Event{s.startedEvent(started), {Type: EventFork,
		Data: map[string]any{"parent_id": src, "kept": int64(keep)}}}, now)
	childSess.lastSeq = childSess.rec.Events[len(childSess.rec.Events)-1].Seq
	child.Events = childSess.rec.Events
	srcEvent := parent.stamp([]Event{{Type: EventFork,
		Data: map[string]any{"child_id": dst, "kept": int64(keep)}}}, now)[0]
	spec := &ForkSpec{Src: src, SrcVersion: parent.rec.Version, SrcEvent: srcEvent, SrcTime: now, KeepFirst: keep, Dst: *child}
	if err := s.backend.Fork(ctx, spec); err != nil {
		parent.mu.Unlock()
		if errors.Is(err, ErrExists) {
			return nil, wrap(dst, err)
		}
		stale = errors.Is(err, ErrConflict) // as in apply
		return nil, wrap(src, err)
	}
	parent.rec.ChildIDs = append(parent.rec.ChildIDs, dst)
	parent.applied(&Change{Events: []Event{srcEvent}, UpdatedAt: now})
	s.logged(parent, []Event{srcEvent}, nil)
	s.observers.notify([]Event{srcEvent}, true)
	s.observers.notify([]Event{srcEvent}, false)
	parent.mu.Unlock()
	s.notifyCreated(childSess, child.Events)

	s.mu.Lock()
	s.lru.Get(src) // refresh the source before inserting the child
	s.lru.Add(dst, childSess)
	s.added(reserved)
	created = true
	s.mu.Unlock()
	return []Event{srcEvent}, nil
}

// Close marks the session completed (durable backends keep it) and evicts
// it from the LRU with its subscribers.
func (s *Store) Close(ctx context.Context, id string) error {
	if !s.backend.Durable() {
		if _, err := s.get(ctx, id); err != nil {
			return err
		}
	} else {
		ch := &Change{Status: StatusCompleted, Events: []Event{{Type: EventStatus, Data: map[string]any{"status": string(StatusCompleted)}}}}
		if _, err := s.write(ctx, id, ch, anyVersion, false, nil); err != nil {
			return err
		}
	}
	s.drop(id, nil)
	return nil
}

// Lineage is a session's place in its fork tree.
type Lineage struct {
	ParentID string
	ChildIDs []string
	RootID   string
}

// Ancestry returns the session's parent, children and root (found by
// walking parents while they are known to the store). Parents that lead
// back to a session already walked (a cycle stored by an older version)
// are ErrCycle.
func (s *Store) Ancestry(ctx context.Context, id string) (*Lineage, error) {
	rec, err := s.Meta(ctx, id)
	if err != nil {
		return nil, err
	}
	l := &Lineage{ParentID: rec.ParentID, ChildIDs: rec.ChildIDs, RootID: id}
	seen := map[string]bool{id: true}
	path := []string{id}
	for p := rec.ParentID; p != ""; {
		path = append(path, p)
		if seen[p] {
			return nil, cycleError(id, path)
		}
		seen[p] = true
		prec, err := s.Meta(ctx, p)
		if err != nil {
			break // the parent is gone: the oldest known ancestor is the root
		}
		l.RootID = p
		p = prec.ParentID
	}
	return l, nil
}

// Meta returns the session's state without messages and events: status,
// turns, lineage, summary. It does not refresh recency.
func (s *Store) Meta(ctx context.Context, id string) (*Record, error) {
	if sess, ok := s.live(id); ok {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		out := cloneRecordMeta(&sess.rec)
		return &out, nil
	}
	if !s.backend.Durable() {
		return nil, wrap(id, ErrNotFound)
	}
	rec, err := s.backend.LoadMeta(ctx, id)
	return rec, wrap(id, err)
}

// Subscriber is a receiver of a session's events. The store only keeps
// subscribers, in registration order, while the session is live; the
// host calls them (package builtins calls a Starlark function on the
// thread whose builtin wrote the events). Name identifies it in errors.
type Subscriber interface {
	Name() string
}

// Subscribe appends sub to the session's subscribers.
func (s *Store) Subscribe(ctx context.Context, id string, sub Subscriber) error {
	sess, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	sess.subs = append(sess.subs, sub)
	sess.mu.Unlock()
	return nil
}

// Subscribers returns the session's subscribers in registration order
// (none for a session that is not live).
func (s *Store) Subscribers(id string) []Subscriber {
	sess, ok := s.live(id)
	if !ok {
		return nil
	}
	return sess.subscribers()
}

// QueueFeedback adds m to the session's pending queue, delivered by the
// next turn of an agent loop on the session. m is validated on its own.
func (s *Store) QueueFeedback(ctx context.Context, id string, m message.Message) error {
	if err := message.CheckShape(&m); err != nil {
		return err
	}
	sess, err := s.get(ctx, id)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	sess.pending = append(sess.pending, m)
	sess.mu.Unlock()
	return nil
}

// TakeFeedback removes and returns the session's pending messages.
func (s *Store) TakeFeedback(id string) []message.Message {
	sess, ok := s.live(id)
	if !ok {
		return nil
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	out := sess.pending
	sess.pending = nil
	return out
}

// Live returns summaries of the live sessions, most recently used first.
func (s *Store) Live() []Summary {
	keys := append(s.heldIDs(), s.lru.Keys()...) // oldest first (the pinned ones pushed out first)
	out := make([]Summary, 0, len(keys))
	for i := len(keys) - 1; i >= 0; i-- {
		sess, ok := s.live(keys[i])
		if !ok {
			continue
		}
		sess.mu.Lock()
		out = append(out, Summary{ID: sess.rec.ID, Status: sess.rec.Status, CreatedAt: sess.rec.CreatedAt,
			UpdatedAt: sess.rec.UpdatedAt, ParentID: sess.rec.ParentID, Length: sess.transcript.Len(),
			Turns: sess.rec.Turns, Children: len(sess.rec.ChildIDs), Title: sess.rec.Title,
			FirstPrompt: sess.rec.FirstPrompt, Metadata: jsonvalue.CloneObject(sess.rec.Metadata)})
		sess.mu.Unlock()
	}
	return out
}

// Shutdown commits every session's staged changes and releases the
// backend. It returns the first error.
func (s *Store) Shutdown() error {
	err := s.CommitAll(context.Background())
	if cerr := s.backend.Close(); err == nil {
		err = cerr
	}
	return err
}

// Create creates the session id, empty and active, with info's title
// and metadata. Unlike Open it never resumes: ErrExists if the id is
// live or stored.
func (s *Store) Create(ctx context.Context, id string, info Info) error {
	if err := info.check(); err != nil {
		return wrap(id, err)
	}
	unlock, err := s.ids.lock(ctx, id)
	if err != nil {
		return wrap(id, err)
	}
	defer s.settle()
	defer unlock()
	if _, ok := s.live(id); ok {
		return wrap(id, ErrExists)
	}
	return s.create(ctx, id, 0, info)
}

// Delete removes the session from the store and the backend, history
// included (ErrNotFound; ErrHasChildren if forks of it are stored).
func (s *Store) Delete(ctx context.Context, id string) error {
	unlock, err := s.ids.lock(ctx, id)
	if err != nil {
		return wrap(id, err)
	}
	defer unlock()
	if err := s.backend.Delete(ctx, id, false); err != nil {
		return wrap(id, err)
	}
	s.dropLocked(id, nil)
	return nil
}

// Unload drops a durable session from the LRU (and its subscribers),
// keeping it stored; its next use reloads it. With a backend that is
// not durable it does nothing, since eviction would delete the session.
func (s *Store) Unload(id string) {
	if !s.backend.Durable() {
		return
	}
	s.drop(id, nil)
}

// storedVersion reads session id's stored version and creation time:
// through VersionReader when backend has it, else LoadMeta.
func storedVersion(ctx context.Context, backend Backend, id string) (int64, time.Time, error) {
	if vr, ok := backend.(VersionReader); ok {
		return vr.StoredVersion(ctx, id)
	}
	rec, err := backend.LoadMeta(ctx, id)
	if err != nil {
		return 0, time.Time{}, err
	}
	return rec.Version, rec.CreatedAt, nil
}

// Refresh drops the live copy of session id when it is stale: when the
// backend holds a version another process wrote since this store loaded
// or last wrote it. The next use reloads it. A process that shares a
// durable backend with others calls it before it reads or starts work on
// a session another process may have written (a replica of skein serve
// does, before each read and each turn). It does nothing for a session
// that is not live or a backend that is not durable, and reads only the
// session's metadata otherwise.
func (s *Store) Refresh(ctx context.Context, id string) error {
	if !s.backend.Durable() {
		return nil
	}
	sess, ok := s.live(id)
	if !ok {
		return nil
	}
	var v StoredVersion
	v.Version, v.Created, v.Err = storedVersion(ctx, s.backend, id)
	return s.refresh(id, sess, v)
}

// RefreshFrom is Refresh with the session's stored version read already
// (VersionLocker.TryLockVersion): it drops the live copy of session id
// when v shows it stale, and reads nothing.
func (s *Store) RefreshFrom(id string, v StoredVersion) error {
	if !s.backend.Durable() {
		return nil
	}
	sess, ok := s.live(id)
	if !ok {
		return nil
	}
	return s.refresh(id, sess, v)
}

// refresh drops sess, the live copy of session id, when v (its stored
// version) shows it stale.
func (s *Store) refresh(id string, sess *Session, v StoredVersion) error {
	version, created, err := v.Version, v.Created, v.Err
	if errors.Is(err, ErrNotFound) {
		s.forget(id, sess)
		return nil
	}
	if err != nil {
		return wrap(id, err)
	}
	sess.mu.Lock()
	// A newer stored version makes the copy stale (an older one is a
	// read that began before this store's own commit), and so does
	// another creation time (the session was deleted and created again).
	stale := version > sess.storedVersion() || !created.Equal(sess.rec.CreatedAt)
	sess.mu.Unlock()
	if stale {
		s.forget(id, sess)
	}
	return nil
}
