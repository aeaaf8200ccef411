package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
)

// hub fans the store's events out to the SSE clients of each session.
// Publishing never blocks: a client whose buffer is full is dropped.
type hub struct {
	size    int
	metrics *metrics

	// watch, when set, starts push notification of the events other
	// processes write to a session (sessions.Notifier) while the session
	// has clients; it returns the function that stops it.
	watch func(id string) (stop func())

	mu       sync.Mutex
	clients  map[string]map[*client]bool
	watching map[string]func() // the stop functions of watch, by session
	closed   bool
}

// client is one SSE stream's subscription.
type client struct {
	events chan sessions.Event
	gone   chan struct{} // closed when the client is dropped or the hub closes
	once   sync.Once
	// wake is signalled when the store holds events of the session this
	// client has not sent (written by another process): the stream then
	// reads them from the store.
	wake chan struct{}
	// sent is the seq of the last stored event the stream sent.
	sent atomic.Int64
	// queued is the seq of the last stored event the hub put in events
	// (the stream sends it, without reading the store). Guarded by the
	// hub's mu.
	queued int64
}

// behind reports whether the client has neither sent nor been given the
// stored event seq (the hub's mu held).
func (c *client) behind(seq int64) bool { return max(c.sent.Load(), c.queued) < seq }

func (c *client) drop() { c.once.Do(func() { close(c.gone) }) }

func newHub(size int, m *metrics) *hub {
	return &hub{size: size, metrics: m, clients: map[string]map[*client]bool{}, watching: map[string]func(){}}
}

// subscribe registers a client for the events of session id. For the
// first client of a session it starts watching the session, when the
// hub watches, and returns once the watch is in place.
func (h *hub) subscribe(id string) *client {
	c := &client{events: make(chan sessions.Event, h.size), gone: make(chan struct{}), wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		c.drop()
		return c
	}
	first := h.clients[id] == nil
	if first {
		h.clients[id] = map[*client]bool{}
	}
	h.clients[id][c] = true
	h.metrics.sseClients.Inc()
	if !first || h.watch == nil {
		return c
	}
	// Watch outside the lock (it waits for the store), and keep it only
	// while the session has clients.
	h.mu.Unlock()
	stop := h.watch(id)
	h.mu.Lock()
	if len(h.clients[id]) == 0 || h.watching[id] != nil {
		stop()
	} else {
		h.watching[id] = stop
	}
	return c
}

// unsubscribe removes a client.
func (h *hub) unsubscribe(id string, c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(id, c)
	c.drop()
}

// removeLocked removes a client of session id, if it is one, and stops
// watching a session left without clients. The caller holds h.mu.
func (h *hub) removeLocked(id string, c *client) {
	set := h.clients[id]
	if !set[c] {
		return
	}
	delete(set, c)
	h.metrics.sseClients.Dec()
	if len(set) == 0 {
		delete(h.clients, id)
		if stop := h.watching[id]; stop != nil {
			stop()
			delete(h.watching, id)
		}
	}
}

// publish hands e to the clients of its session; a client with a full
// buffer is dropped (it reconnects with Last-Event-ID).
func (h *hub) publish(e sessions.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients[e.SessionID] {
		select {
		case c.events <- e:
			if !transient(e.Type) {
				c.queued = max(c.queued, e.Seq)
			}
		default:
			h.removeLocked(e.SessionID, c)
			h.metrics.sseDropped.Inc()
			c.drop()
		}
	}
}

// streamed returns the ids of the sessions that have clients.
func (h *hub) streamed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.clients))
	for id := range h.clients {
		ids = append(ids, id)
	}
	return ids
}

// wake tells the clients of session id that its log in the store reaches
// seq: those that have not sent that far, and were not given the events
// that far by publish, read the rest from the store.
func (h *hub) wake(id string, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients[id] {
		if c.behind(seq) {
			select {
			case c.wake <- struct{}{}:
			default: // already signalled
			}
		}
	}
}

// closeAll drops every client and refuses new ones (shutdown).
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, set := range h.clients {
		for c := range set {
			h.removeLocked(id, c)
			c.drop()
		}
	}
}

// sseWriteTimeout bounds the write of one SSE frame.
const sseWriteTimeout = 10 * time.Second

// transient reports whether events of type typ are live only, never
// stored: an agent's (text_delta, state) and the server's queue events.
func transient(typ string) bool { return agent.Transient(typ) || typ == eventQueue }

// streamEvents handles GET /api/sessions/{id}/events: the session's
// event log as Server-Sent Events, from after Last-Event-ID (header, or
// ?lastEventId=) or from the start, then live. Stored events carry
// their seq as the SSE id; transient events (text_delta, state) are
// live only and carry none.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	last := int64(0)
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v != "" {
		if last, err = strconv.ParseInt(v, 10, 64); err != nil || last < 0 {
			return errorf(http.StatusBadRequest, "bad_query", "Last-Event-ID must be an integer >= 0, got %q", truncate(v, 40))
		}
	}
	release, refused := s.streams.acquire(r)
	if refused != nil {
		return refused
	}
	defer release()
	// Subscribe before reading the log: an event committed in between is
	// in both and is sent once (by seq); none falls between.
	c := s.hub.subscribe(id)
	defer s.hub.unsubscribe(id, c)
	c.sent.Store(last)
	rec, err := s.snapshot(r.Context(), id)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server's read timeout: without this, the
	// expired read deadline would end it.
	rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	msgs := newAppended(s.store.Backend(), rec)
	send := func(e *sessions.Event) error {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if e.Type == sessions.EventMessage {
			if m := msgs.message(r.Context(), e); m != nil {
				if data, err = withMessage(data, e, m); err != nil {
					return err
				}
			}
		}
		rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if transient(e.Type) {
			_, err = fmt.Fprintf(w, "data: %s\n\n", data)
		} else {
			_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, data)
		}
		return err
	}
	// sendStored sends a stored event if it is newer than the last sent
	// (the history, or a catch-up, may have sent it).
	sendStored := func(e *sessions.Event) error {
		if e.Seq <= last {
			return nil
		}
		if err := send(e); err != nil {
			return err
		}
		last = e.Seq
		c.sent.Store(last)
		return nil
	}
	// catchUp sends what the store holds after the last event sent:
	// events written by another process sharing the store.
	catchUp := func() error {
		events, err := sessions.EventsAfter(r.Context(), s.store.Backend(), id, last)
		if err != nil {
			if r.Context().Err() == nil { // else the client left
				s.metrics.storeErrors.Inc()
				s.log.Error("reading a stream's events failed", "id", id, "err", err)
			}
			return err
		}
		for i := range events {
			if err := sendStored(&events[i]); err != nil {
				return err
			}
		}
		return nil
	}
	// sendLive sends a live event: a transient one always; a stored
	// event after those before it, which another process may have
	// written (so the hub did not carry them).
	sendLive := func(e *sessions.Event) error {
		if transient(e.Type) {
			return send(e)
		}
		if e.Seq > last+1 {
			if err := catchUp(); err != nil {
				return err
			}
		}
		return sendStored(e)
	}
	for i := range rec.Events {
		if err := sendStored(&rec.Events[i]); err != nil {
			return nil
		}
	}
	rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := fmt.Fprint(w, ": ready\n\n"); err != nil {
		return nil
	}
	rc.Flush()
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case e := <-c.events:
			// This event and what is already queued, then one flush.
			for n := len(c.events); ; n-- {
				if err := sendLive(&e); err != nil {
					return nil
				}
				if n == 0 {
					break
				}
				e = <-c.events
			}
		case <-c.wake:
			if err := catchUp(); err != nil {
				return nil
			}
		case <-beat.C:
			rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
		case <-c.gone:
			return nil
		case <-r.Context().Done():
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
