package sessions

import "sync"

// observers are the functions a Store calls with the events it logs (see
// Store.Observe and Store.ObserveLogged). The zero value has none.
type observers struct {
	mu   sync.RWMutex
	next int
	fns  map[int]observer
}

type observer struct {
	fn     func(Event)
	logged bool // called when events are logged, not when committed
}

// Observe registers fn to receive every event of every session of the
// store: each logged event once it is committed to the backend (a staged
// change's events when it is committed, see Stage), in seq order per
// session, a "message" event with the message it appended as its Message,
// and each transient event given to Publish (text_delta).
// fn runs on the writing goroutine while the session is locked, so it
// must be quick and must not call back into the store; it may not modify
// the event. The returned function unregisters fn.
//
// Observers see what this Store writes, not what another process writes
// to the same backend.
func (s *Store) Observe(fn func(Event)) (stop func()) {
	return s.observers.add(observer{fn: fn})
}

// ObserveLogged is Observe for events as they are logged, staged or not:
// an observer that needs to know a change was made (to commit it sooner,
// say) before it is committed. Transient events are not included.
func (s *Store) ObserveLogged(fn func(Event)) (stop func()) {
	return s.observers.add(observer{fn: fn, logged: true})
}

func (o *observers) add(ob observer) (stop func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fns == nil {
		o.fns = map[int]observer{}
	}
	id := o.next
	o.next++
	o.fns[id] = ob
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.fns, id)
	}
}

// Publish gives a transient event, one that is never stored (a streamed
// text_delta), to the store's observers.
func (s *Store) Publish(e Event) {
	s.observers.notify([]Event{e}, false)
}

// LastSeq returns the seq of the newest event logged to session id while
// it is live in this store (0 when it is not): the seq a transient event
// published for the session carries.
func (s *Store) LastSeq(id string) int64 {
	sess, ok := s.live(id)
	if !ok {
		return 0
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.lastSeq
}

// Observed reports whether any observer of committed events is
// registered: whether Publish reaches anyone.
func (s *Store) Observed() bool { return s.observers.observed() }

// notify calls the observers of logged events (logged set) or of
// committed ones with events.
func (o *observers) notify(events []Event, logged bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, ob := range o.fns {
		if ob.logged != logged {
			continue
		}
		for _, e := range events {
			ob.fn(e)
		}
	}
}

// committed notifies the events of changes just written to the backend,
// each "message" event with the message it appended (Event.Message).
func (o *observers) committed(changes []*Change) {
	if !o.observed() {
		return
	}
	for _, ch := range changes {
		o.notify(withMessages(ch), false)
	}
}

// observed reports whether an observer of committed events is registered.
func (o *observers) observed() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, ob := range o.fns {
		if !ob.logged {
			return true
		}
	}
	return false
}

// withMessages returns ch's events with the message each "message" event
// appended set as its Message, when there is one such event per appended
// message (the store logs them so); ch is not changed.
func withMessages(ch *Change) []Event {
	n := 0
	for i := range ch.Events {
		if ch.Events[i].Type == EventMessage {
			n++
		}
	}
	if n == 0 || n != len(ch.Append) {
		return ch.Events
	}
	out := make([]Event, len(ch.Events))
	copy(out, ch.Events)
	k := 0
	for i := range out {
		if out[i].Type == EventMessage {
			m := ch.Append[k]
			out[i].Message = &m
			k++
		}
	}
	return out
}
