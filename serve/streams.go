package serve

import (
	"net"
	"net/http"
	"sync"
)

// Defaults of the caps on open SSE streams (Config.MaxStreams and
// Config.MaxStreamsPerClient).
const (
	DefaultMaxStreams          = 1000
	DefaultMaxStreamsPerClient = 100
)

// streamCaps counts the open SSE streams, in all and by client address,
// and refuses one past either cap: 3,000 streams from one client were
// accepted, each holding a goroutine and an event buffer (+280 MB).
type streamCaps struct {
	max, perClient int

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

func newStreamCaps(max, perClient int) *streamCaps {
	return &streamCaps{max: max, perClient: perClient, byClient: map[string]int{}}
}

// acquire counts a new stream of r's client, or returns the 429 that
// refuses it. release must be called when an acquired stream ends.
func (c *streamCaps) acquire(r *http.Request) (release func(), err *apiError) {
	client := clientAddr(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	var refused *apiError
	switch {
	case c.byClient[client] >= c.perClient:
		refused = errorf(http.StatusTooManyRequests, "too_many_streams", "too many event streams: this client (%s) has %d open, the most one client may have (--max-streams-per-client); close one before opening another", client, c.byClient[client])
	case c.total >= c.max:
		refused = errorf(http.StatusTooManyRequests, "too_many_streams", "too many event streams: the server has %d open, the most it allows (--max-streams); try again later", c.total)
	}
	if refused != nil {
		refused.retryAfter = 5
		return nil, refused
	}
	c.total++
	c.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.byClient[client]--; c.byClient[client] <= 0 {
				delete(c.byClient, client)
			}
		})
	}, nil
}

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
