package sqlite

import (
	"context"
	"sync"
	"time"

	"github.com/skein-dev/skein/sessions"
)

var (
	_ sessions.EventReader   = (*Lazy)(nil)
	_ sessions.LockerBackend = (*Lazy)(nil)
)

// EventsAfter returns the session's events after seq after
// (ErrNotFound while the file does not exist).
func (l *Lazy) EventsAfter(ctx context.Context, id string, after int64, limit int) ([]sessions.Event, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orNotFound(id, err)
	}
	return b.EventsAfter(ctx, id, after, limit)
}

// LastSeqs returns the newest event seq of each stored session of ids
// (none while the file does not exist).
func (l *Lazy) LastSeqs(ctx context.Context, ids []string) (map[string]int64, error) {
	b, err := l.backend(false)
	if b == nil {
		return map[string]int64{}, err
	}
	return b.LastSeqs(ctx, ids)
}

// NewLocker returns the file's cross-process locks (see
// Backend.NewLocker). Taking a lock opens the file, creating it; until
// then no lock is held, and answers say so without creating it.
func (l *Lazy) NewLocker(poll time.Duration) (sessions.Locker, error) {
	if poll <= 0 {
		return (&Backend{}).NewLocker(poll) // the same error
	}
	return &lazyLocker{l: l, poll: poll}, nil
}

// lazyLocker is the Locker of a Lazy backend: the Locker of its Backend
// once the file is open.
type lazyLocker struct {
	l    *Lazy
	poll time.Duration

	mu     sync.Mutex
	locker sessions.Locker // nil until the file is open
}

// get returns the Backend's Locker, opening (with create, creating) the
// file; nil, without an error, when the file does not exist.
func (ll *lazyLocker) get(create bool) (sessions.Locker, error) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.locker != nil {
		return ll.locker, nil
	}
	b, err := ll.l.backend(create)
	if b == nil {
		return nil, err
	}
	if ll.locker, err = b.NewLocker(ll.poll); err != nil {
		return nil, err
	}
	return ll.locker, nil
}

func (ll *lazyLocker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	l, err := ll.get(true)
	if err != nil {
		return nil, err
	}
	return l.TryLock(ctx, name)
}

var _ sessions.VersionLocker = (*lazyLocker)(nil)

// TryLockVersion is the Backend's locker's TryLockVersion (opening the
// file, creating it).
func (ll *lazyLocker) TryLockVersion(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	l, err := ll.get(true)
	if err != nil {
		return nil, sessions.StoredVersion{}, err
	}
	return l.(sessions.VersionLocker).TryLockVersion(ctx, name, id)
}

func (ll *lazyLocker) Interrupt(ctx context.Context, name, reason string) (bool, error) {
	l, err := ll.get(false)
	if l == nil {
		return false, err
	}
	return l.Interrupt(ctx, name, reason)
}

func (ll *lazyLocker) Held(ctx context.Context, names []string) (map[string]bool, error) {
	l, err := ll.get(false)
	if l == nil {
		return map[string]bool{}, err
	}
	return l.Held(ctx, names)
}

func (ll *lazyLocker) Abandoned(ctx context.Context, limit int) ([]string, error) {
	l, err := ll.get(false)
	if l == nil {
		return nil, err
	}
	return l.Abandoned(ctx, limit)
}

func (ll *lazyLocker) Close() error {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.locker == nil {
		return nil
	}
	return ll.locker.Close()
}
