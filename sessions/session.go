package sessions

import (
	"github.com/skein-dev/skein/sessions/message"
	"slices"
	"sync"
	"time"
)

// Session is a live session held by a Store. Its state is read through
// the Store (Snapshot, Length, ...) and changed only through Store.Apply
// and the other Store methods, which write through to the backend first.
//
// Besides its stored state a live session holds two things that are never
// stored: its subscribers (opaque values, Starlark callables in practice)
// and its pending feedback queue.
type Session struct {
	mu         sync.Mutex
	rec        Record // Messages unused (see transcript); Events only when logLoaded
	transcript message.Transcript
	// lastSeq is the seq of the newest logged event.
	lastSeq int64
	// logLoaded reports whether rec.Events holds the whole event log. A
	// session resumed through a PartialLoader starts without it (the log
	// stays in the backend, where every event is written) and reads it
	// on its first snapshot.
	logLoaded bool
	subs      []Subscriber
	pending   []message.Message
	evicted   bool
	// promptChecked reports whether rec.FirstPrompt is known to match the
	// transcript (it is checked on the session's first write).
	promptChecked bool
	// staged are changes applied in memory but not yet written to the
	// backend (Store.Stage), oldest first.
	staged []*Change
}

// storedVersion returns the version the backend holds: the session's
// version before its staged changes.
func (s *Session) storedVersion() int64 {
	return s.rec.Version - int64(len(s.staged))
}

// newSession returns a live session holding rec, whose Events are its
// whole event log.
func newSession(rec *Record) *Session {
	s := &Session{rec: cloneRecordFields(rec), transcript: message.NewTranscript(rec.Messages), logLoaded: true}
	if n := len(rec.Events); n > 0 {
		s.lastSeq = rec.Events[n-1].Seq
	}
	return s
}

// resumedSession returns a live session holding rec, loaded without its
// event log; lastSeq is the seq of the log's newest event.
func resumedSession(rec *Record, lastSeq int64) *Session {
	s := &Session{rec: cloneRecordMeta(rec), transcript: message.NewTranscript(rec.Messages), lastSeq: lastSeq}
	return s
}

// applied records in memory a change the backend has committed: its
// message edits and its other fields, and its events in the log (when
// the log is loaded) and in lastSeq.
func (s *Session) applied(ch *Change) {
	s.transcript = ApplyToTranscript(s.transcript, ch)
	if s.logLoaded {
		ApplyToRecord(&s.rec, ch)
	} else {
		applyFields(&s.rec, ch) // no log to append to: see logged
	}
	s.logged(ch.Events)
}

// logged notes events just appended to the log by ApplyToRecord: a
// session without its loaded log keeps only their seq.
func (s *Session) logged(events []Event) {
	if n := len(events); n > 0 {
		s.lastSeq = events[n-1].Seq
	}
	if !s.logLoaded {
		s.rec.Events = nil
	}
}

// ID returns the session id.
func (s *Session) ID() string { return s.rec.ID }

// record returns a copy of the session's state; Messages shares the
// (immutable) message values. The caller holds s.mu and has loaded the
// log (see Store.record).
func (s *Session) record() *Record {
	out := cloneRecordFields(&s.rec)
	s.transcript = s.transcript.Flat()
	out.Messages = s.transcript.Slice()
	return &out
}

// messages returns the current message list without copying (the caller
// must not modify it).
func (s *Session) messages() []message.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcript = s.transcript.Flat()
	return s.transcript.Slice()
}

func (s *Session) length() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transcript.Len()
}

// stamp sequences and timestamps events for this session, starting after
// the last logged seq, in place, and returns events.
func (s *Session) stamp(events []Event, now time.Time) []Event {
	seq := s.lastSeq
	for i := range events {
		e := &events[i]
		seq++
		e.Seq = seq
		e.SessionID = s.rec.ID
		if e.Time.IsZero() {
			e.Time = now
		}
	}
	return events
}

// Subscribers returns the session's subscribers in registration order.
func (s *Session) subscribers() []Subscriber {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs)
}
