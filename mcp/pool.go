package mcp

import (
	"context"
	"errors"
	"sync"

	"github.com/skein-dev/skein/workspace"
)

// Pool holds the servers of one run, each started once for its key: the
// MCP servers an agent file names serve every turn of every session bound
// to it, and start on the first. The zero Pool is ready to use; it is
// safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	servers map[string]*pooled
	closed  bool
}

type pooled struct {
	once sync.Once
	srv  *Server
	err  error
}

// Connect returns the server started for key, connecting it with spec
// and policy on the first call (see Connect). A failed connection is
// remembered: the next call for key returns the same error. key must
// identify spec and policy (an agent's name and its settings, say).
func (p *Pool) Connect(ctx context.Context, key string, spec Spec, policy *workspace.Policy) (*Server, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the run has ended: its MCP servers are closed")
	}
	if p.servers == nil {
		p.servers = map[string]*pooled{}
	}
	e := p.servers[key]
	if e == nil {
		e = &pooled{}
		p.servers[key] = e
	}
	p.mu.Unlock()
	e.once.Do(func() { e.srv, e.err = Connect(ctx, spec, policy) })
	return e.srv, e.err
}

// Close closes every server of the pool; later Connects fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	servers := p.servers
	p.servers, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for _, e := range servers {
		e.once.Do(func() {}) // a connection in progress finishes first
		if e.srv != nil {
			errs = append(errs, e.srv.Close())
		}
	}
	return errors.Join(errs...)
}
