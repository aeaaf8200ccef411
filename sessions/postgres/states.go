package postgres

import (
	"sync"

	"github.com/skein-dev/skein/sessions/internal/rowstore"
)

// maxStates bounds the state cache: past it the cache starts over.
const maxStates = 10_000

// stateCache remembers the write state of the sessions this Backend
// loaded, created or wrote, so that a Write of a session at the version
// it last saw skips reading the state first: one round trip per write
// instead of two. A cached state is a guess that the statement checks: a
// session row's (sid, version) pair names one state for ever (every
// change of the row bumps its version, and a deleted id that is created
// again gets a new sid), and the write's statement applies only where
// both still match. A write that misses falls back to reading the state.
type stateCache struct {
	mu sync.Mutex
	m  map[string]rowstore.State
}

func (c *stateCache) get(id string) (rowstore.State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[id]
	return st, ok
}

func (c *stateCache) put(id string, st rowstore.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxStates {
		c.m = map[string]rowstore.State{}
	}
	c.m[id] = st
}

func (c *stateCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

func (c *stateCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
