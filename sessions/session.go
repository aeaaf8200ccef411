package sessions

import (
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
	rec        Record // Messages unused; see transcript
	transcript Transcript
	subs       []any
	pending    []Message
	evicted    bool
}

func newSession(rec *Record) *Session {
	s := &Session{rec: cloneRecordFields(rec), transcript: NewTranscript(rec.Messages)}
	return s
}

// ID returns the session id.
func (s *Session) ID() string { return s.rec.ID }

// record returns a copy of the session's state; Messages shares the
// (immutable) message values.
func (s *Session) record() *Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := cloneRecordFields(&s.rec)
	s.transcript = s.transcript.Flat()
	out.Messages = s.transcript.Slice()
	return &out
}

// messages returns the current message list without copying (the caller
// must not modify it).
func (s *Session) messages() []Message {
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
// the last logged seq.
func (s *Session) stamp(events []Event, now time.Time) []Event {
	seq := int64(0)
	if n := len(s.rec.Events); n > 0 {
		seq = s.rec.Events[n-1].Seq
	}
	out := make([]Event, len(events))
	for i, e := range events {
		seq++
		e.Seq = seq
		e.SessionID = s.rec.ID
		if e.Time.IsZero() {
			e.Time = now
		}
		out[i] = e
	}
	return out
}

// Subscribers returns the session's subscribers in registration order.
func (s *Session) subscribers() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs)
}
