package sessions

import (
	"context"
	"sync"
)

// LockSignal is the interrupt signal every Lock carries; Locker
// implementations embed it in their locks. The zero value is ready.
type LockSignal struct {
	once   sync.Once
	mu     sync.Mutex
	ch     chan struct{}
	reason string
}

func (s *LockSignal) init() {
	s.mu.Lock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	s.mu.Unlock()
}

// Interrupt closes the Interrupted channel with reason; only the first
// call counts.
func (s *LockSignal) Interrupt(reason string) {
	s.init()
	s.once.Do(func() {
		s.mu.Lock()
		s.reason = reason
		s.mu.Unlock()
		close(s.ch)
	})
}

// Interrupted is closed by the first Interrupt.
func (s *LockSignal) Interrupted() <-chan struct{} {
	s.init()
	return s.ch
}

// Reason is the reason given to the first Interrupt, "" before it.
func (s *LockSignal) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// NewLocalLocker returns a Locker for one process: its locks exclude the
// holders of this process only. It suits a backend no other process
// uses (the memory backend); its holders cannot die without the process.
func NewLocalLocker() Locker { return &localLocker{held: map[string]*localLock{}} }

type localLocker struct {
	mu   sync.Mutex
	held map[string]*localLock
}

type localLock struct {
	LockSignal
	l    *localLocker
	name string
}

func (l *localLocker) TryLock(_ context.Context, name string) (Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] != nil {
		return nil, ErrLocked
	}
	lk := &localLock{l: l, name: name}
	l.held[name] = lk
	return lk, nil
}

func (l *localLocker) Interrupt(_ context.Context, name, reason string) (bool, error) {
	l.mu.Lock()
	lk := l.held[name]
	l.mu.Unlock()
	if lk == nil {
		return false, nil
	}
	lk.Interrupt(reason)
	return true, nil
}

func (l *localLocker) Held(_ context.Context, names []string) (map[string]bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for _, n := range names {
		if l.held[n] != nil {
			out[n] = true
		}
	}
	return out, nil
}

func (l *localLocker) Abandoned(context.Context, int) ([]string, error) { return nil, nil }

func (l *localLocker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, lk := range l.held {
		lk.Interrupt(ReasonLockLost)
		delete(l.held, n)
	}
	return nil
}

func (lk *localLock) Unlock(context.Context) error {
	lk.l.mu.Lock()
	defer lk.l.mu.Unlock()
	if lk.l.held[lk.name] == lk {
		delete(lk.l.held, lk.name)
	}
	return nil
}
