package sessions

import (
	"context"
	"errors"
	"time"
)

// The interfaces of this file are implemented by durable backends that
// several processes may use at once (a SQLite file on one machine, a
// PostgreSQL database shared by many). They let the processes that serve
// one store (replicas of `skein serve`) agree on who works on a session
// and see each other's writes.

// EventReader is implemented by durable backends that read a session's
// event log from a given seq on: a live event stream catches up with
// what other processes wrote without reloading the whole log.
type EventReader interface {
	// EventsAfter returns the session's events with seq > after, oldest
	// first: at most limit of them, or all when limit is 0
	// (ErrNotFound).
	EventsAfter(ctx context.Context, id string, after int64, limit int) ([]Event, error)
	// LastSeqs returns the seq of the newest event of each of ids that
	// is stored (0 for an empty log); unknown ids are left out.
	LastSeqs(ctx context.Context, ids []string) (map[string]int64, error)
}

// LockerBackend is implemented by durable backends that several
// processes share: it returns the backend's cross-process locks.
type LockerBackend interface {
	// NewLocker returns a Locker over the backend. poll is how often a
	// holder checks whether another process asked for its locks (see
	// Locker.Interrupt); the Locker's Close releases what it holds.
	NewLocker(poll time.Duration) (Locker, error)
}

// ErrLocked is Locker.TryLock's refusal of a lock another holder has.
var ErrLocked = errors.New("locked by another holder")

// Locker hands out named locks, each held by at most one holder at a
// time across every process using the backend (two holders in one
// process exclude each other too). A lock whose holder dies without
// releasing it is released for it: at once when the backend can tell
// the holder is gone, else when the holder's lease runs out.
type Locker interface {
	// TryLock takes the lock called name, or fails at once with
	// ErrLocked.
	TryLock(ctx context.Context, name string) (Lock, error)
	// Interrupt asks the holder of the lock called name to give it up,
	// telling it reason; it reports whether the lock was held. The
	// holder learns of it through Lock.Interrupted, within the Locker's
	// poll interval when it is another process.
	Interrupt(ctx context.Context, name, reason string) (bool, error)
	// Held returns which of names are held.
	Held(ctx context.Context, names []string) (map[string]bool, error)
	// Abandoned returns the names of the locks whose holders died
	// holding them (what they were doing may need repair), at most
	// limit of them. Taking such a lock with TryLock clears it.
	Abandoned(ctx context.Context, limit int) ([]string, error)
	// Close releases every lock this Locker holds and stops its
	// background work.
	Close() error
}

// Lock is one held lock.
type Lock interface {
	// Interrupted is closed when another holder asked for the lock
	// (Locker.Interrupt) or when it was lost (its lease ran out, the
	// connection holding it broke); Reason then says why.
	Interrupted() <-chan struct{}
	// Reason is the reason given to Interrupt, or why the lock was lost;
	// "" until Interrupted is closed.
	Reason() string
	// Unlock releases the lock. Calling it again does nothing.
	Unlock(ctx context.Context) error
}

// SoonUnlocker is implemented by Locks whose release can ride on their
// connection's next statement (PostgreSQL's: the advisory unlock is sent
// with the next lock statement of the same connection, or on its own
// after a few milliseconds, instead of in a round trip of its own).
type SoonUnlocker interface {
	// UnlockSoon releases the lock within milliseconds (see the
	// implementation for the bound) without waiting for it: the lock may
	// still show as held to other processes meanwhile, but Held of the
	// same Locker reads it free and a later TryLock of the same name
	// through the same Locker comes after the release. Calling it, or
	// Unlock, again does nothing.
	UnlockSoon()
}

// VersionLocker is implemented by Lockers that can read a session's
// stored version in the round trip that takes a lock (PostgreSQL's: one
// round trip instead of two for a turn, which takes the session's lock
// and then refreshes the session). The holder passes the reading to
// Store.RefreshFrom instead of calling Store.Refresh.
type VersionLocker interface {
	// TryLockVersion is TryLock that, when it takes the lock, then reads
	// session id's stored version as VersionReader.StoredVersion does,
	// after the lock is taken (a write committed before the lock was
	// free is seen). The reading's Err is the read's error (ErrNotFound
	// when the session is not stored); the lock is held all the same.
	TryLockVersion(ctx context.Context, name, id string) (Lock, StoredVersion, error)
}

// StoredVersion is a session's stored version and creation time, read
// from its backend, or the error of that read (ErrNotFound).
type StoredVersion struct {
	Version int64
	Created time.Time
	Err     error
}

// ReasonLockLost is Lock.Reason of a lock lost without an Interrupt.
const ReasonLockLost = "lock lost"

// EventsAfter returns the session's events with seq > after, oldest
// first, from backend: through EventReader when backend is one, else
// from the whole log.
func EventsAfter(ctx context.Context, backend Backend, id string, after int64) ([]Event, error) {
	if r, ok := backend.(EventReader); ok {
		return r.EventsAfter(ctx, id, after, 0)
	}
	var events []Event
	if pl, ok := backend.(PartialLoader); ok {
		var err error
		if events, err = pl.LoadEvents(ctx, id); err != nil {
			return nil, IDError(id, err)
		}
	} else {
		rec, err := backend.Load(ctx, id)
		if err != nil {
			return nil, IDError(id, err)
		}
		events = rec.Events
	}
	i := 0
	for i < len(events) && events[i].Seq <= after {
		i++
	}
	return events[i:], nil
}

// NotifierBackend is implemented by durable backends that push word of
// new events to every process sharing them (PostgreSQL's LISTEN/NOTIFY),
// so that a process following a session need not poll for it.
type NotifierBackend interface {
	// NewNotifier returns a Notifier over the backend; its Close stops
	// it.
	NewNotifier() (Notifier, error)
}

// Notifier tells of new events of sessions as they are committed, by
// any process.
type Notifier interface {
	// Watch calls fn with the seq of the newest event each time session
	// id's log grows, until the returned function is called. fn runs on
	// the Notifier's goroutine and must be quick. Word may be lost (while
	// a broken connection is re-established): a caller that must not
	// miss events also polls (EventReader.LastSeqs).
	Watch(id string, fn func(seq int64)) (stop func())
	// Close stops the Notifier.
	Close() error
}
