package sessions

import "sync"

// observers are the functions a Store calls with every event it logs
// (see Store.Observe). The zero value has none.
type observers struct {
	mu   sync.RWMutex
	next int
	fns  map[int]func(Event)
}

// Observe registers fn to receive every event of every session of the
// store: each logged event once it is committed, in seq order per
// session, and each transient event given to Publish (text_delta). fn
// runs on the writing goroutine while the session is locked, so it must
// be quick and must not call back into the store; it may not modify the
// event. The returned function unregisters fn.
//
// Observers see what this Store writes, not what another process writes
// to the same backend.
func (s *Store) Observe(fn func(Event)) (stop func()) {
	o := &s.observers
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fns == nil {
		o.fns = map[int]func(Event){}
	}
	id := o.next
	o.next++
	o.fns[id] = fn
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.fns, id)
	}
}

// Publish gives a transient event, one that is never stored (a streamed
// text_delta), to the store's observers.
func (s *Store) Publish(e Event) {
	s.observers.notify([]Event{e})
}

func (o *observers) notify(events []Event) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, fn := range o.fns {
		for _, e := range events {
			fn(e)
		}
	}
}
