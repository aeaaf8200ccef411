package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/skein-dev/skein/sessions"
)

var _ sessions.LockerBackend = (*Backend)(nil)

// LockLease is how long a lock outlives its holder's last renewal when
// the holder cannot be seen to have died (see NewLocker). A holder
// renews its locks every third of it.
const LockLease = 15 * time.Second

// NewLocker returns the database's cross-process locks (a row of table
// locks per held lock). A lock is free again once its holder unlocks it,
// once the holder's process is gone (a process on this machine that no
// longer exists: the lock of a killed process is free at once), or once
// its lease (LockLease) ran out without a renewal. Every poll a holder
// checks whether another holder interrupted its locks.
func (b *Backend) NewLocker(poll time.Duration) (sessions.Locker, error) {
	if poll <= 0 {
		return nil, fmt.Errorf("sqlite: lock poll interval must be positive, got %s", poll)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &locker{b: b, poll: poll, host: processHost(), pid: processID(), held: map[string]*lock{},
		cancel: cancel, done: make(chan struct{})}
	go l.watch(ctx)
	return l, nil
}

// locker is a sessions.Locker over a Backend.
type locker struct {
	b      *Backend
	poll   time.Duration
	host   string
	pid    int
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	held   map[string]*lock // by holder token
	closed bool
	// taking counts the TryLocks past their closed check: Close waits
	// for them, so a lock taken while Close runs is released with the
	// others instead of staying in the table.
	taking sync.WaitGroup
}

// lock is one lock a locker holds.
type lock struct {
	sessions.LockSignal
	l            *locker
	name, holder string
}

// holderRow is who holds a lock, as table locks says.
type holderRow struct {
	holder, host string
	pid          int
	expires      int64
}

// alive reports whether the lock's holder still holds it at now.
func (l *locker) alive(h holderRow, now time.Time) bool {
	if h.expires <= now.UnixNano() {
		return false
	}
	return h.host != l.host || processAlive(h.pid)
}

func (l *locker) TryLock(ctx context.Context, name string) (sessions.Lock, error) {
	lk, _, err := l.take(ctx, name, "")
	return lk, err
}

var _ sessions.VersionLocker = (*locker)(nil)

// TryLockVersion takes the lock and, when it got it, reads session id's
// version right after, on the write connection: in the transaction that
// took the lock when another write carried it or the lock's row needed
// one, else just after that statement's commit.
func (l *locker) TryLockVersion(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	return l.take(ctx, name, id)
}

// take takes the lock called name and, when id is not "", reads session
// id's stored version after it.
func (l *locker) take(ctx context.Context, name, id string) (sessions.Lock, sessions.StoredVersion, error) {
	var v sessions.StoredVersion
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, v, errors.New("sqlite: locker is closed")
	}
	l.taking.Add(1)
	l.mu.Unlock()
	defer l.taking.Done()
	lk := &lock{l: l, name: name, holder: uuid.NewString()}
	readVersion := func(ctx context.Context, tx stmter) {
		if id != "" {
			v = l.b.readVersion(ctx, tx, id)
		}
	}
	// A lock without a row is taken by one prepared INSERT, carried by
	// another write if one comes soon (carry.go); a row (the lock is
	// held, or its holder died) needs the transaction below.
	n, err := l.b.execCarriedThen(ctx, func(ctx context.Context, w *writeConn, n int64) {
		if n == 1 {
			readVersion(ctx, w)
		}
	}, l.b.stmts.lock, name, lk.holder, l.host, l.pid, time.Now().Add(LockLease).UnixNano())
	if err != nil {
		return nil, v, fmt.Errorf("sqlite: lock '%s': %w", name, err)
	}
	if n == 1 {
		l.mu.Lock()
		l.held[lk.holder] = lk
		l.mu.Unlock()
		return lk, v, nil
	}
	err = l.b.write(ctx, func(tx *sql.Tx) error {
		now := time.Now()
		h, found, err := lockHolder(ctx, tx, name)
		switch {
		case err != nil:
			return err
		case found && l.alive(h, now):
			return sessions.ErrLocked
		case found:
			if _, err := tx.ExecContext(ctx, `DELETE FROM locks WHERE name = ?`, name); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO locks (name, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?)`,
			name, lk.holder, l.host, l.pid, now.Add(LockLease).UnixNano())
		if err == nil {
			readVersion(ctx, tx)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, sessions.ErrLocked) {
			return nil, v, err
		}
		return nil, v, fmt.Errorf("sqlite: lock '%s': %w", name, err)
	}
	l.mu.Lock()
	l.held[lk.holder] = lk
	l.mu.Unlock()
	return lk, v, nil
}

// lockHolder reads who holds the lock called name.
func lockHolder(ctx context.Context, tx *sql.Tx, name string) (holderRow, bool, error) {
	var h holderRow
	err := tx.QueryRowContext(ctx, `SELECT holder, host, pid, expires FROM locks WHERE name = ?`, name).Scan(&h.holder, &h.host, &h.pid, &h.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return h, false, nil
	}
	return h, err == nil, err
}

func (l *locker) Interrupt(ctx context.Context, name, reason string) (bool, error) {
	var holder string
	err := l.b.write(ctx, func(tx *sql.Tx) error {
		h, found, err := lockHolder(ctx, tx, name)
		if err != nil || !found || !l.alive(h, time.Now()) {
			return err
		}
		holder = h.holder
		_, err = tx.ExecContext(ctx, `UPDATE locks SET interrupt = ? WHERE name = ? AND interrupt IS NULL`, reason, name)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: interrupt lock '%s': %w", name, err)
	}
	if holder == "" {
		return false, nil
	}
	// A holder in this process learns of it at once.
	l.mu.Lock()
	lk := l.held[holder]
	l.mu.Unlock()
	if lk != nil {
		lk.Interrupt(reason)
	}
	return true, nil
}

func (l *locker) Held(ctx context.Context, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	err := l.scanLocks(ctx, `SELECT name, holder, host, pid, expires FROM locks WHERE name IN (?`+strings.Repeat(", ?", len(names)-1)+`)`, args,
		func(name string, h holderRow, now time.Time) bool {
			if l.alive(h, now) {
				out[name] = true
			}
			return true
		})
	return out, err
}

func (l *locker) Abandoned(ctx context.Context, limit int) ([]string, error) {
	var out []string
	err := l.scanLocks(ctx, `SELECT name, holder, host, pid, expires FROM locks`, nil, func(name string, h holderRow, now time.Time) bool {
		if !l.alive(h, now) {
			out = append(out, name)
		}
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// scanLocks calls fn for each row of query over table locks until it
// returns false.
func (l *locker) scanLocks(ctx context.Context, query string, args []any, fn func(name string, h holderRow, now time.Time) bool) error {
	err := l.b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		now := time.Now()
		for rows.Next() {
			var name string
			var h holderRow
			if err := rows.Scan(&name, &h.holder, &h.host, &h.pid, &h.expires); err != nil {
				return err
			}
			if !fn(name, h, now) {
				break
			}
		}
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("sqlite: locks: %w", err)
	}
	return nil
}

func (lk *lock) Unlock(ctx context.Context) error {
	l := lk.l
	l.mu.Lock()
	_, mine := l.held[lk.holder]
	delete(l.held, lk.holder)
	l.mu.Unlock()
	if !mine {
		return nil
	}
	// Unlock even when ctx is done: a lock left behind would stay held
	// until its lease runs out.
	ctx = context.WithoutCancel(ctx)
	if _, err := l.b.execCarried(ctx, l.b.stmts.unlock, lk.name, lk.holder); err != nil {
		return fmt.Errorf("sqlite: unlock '%s': %w", lk.name, err)
	}
	return nil
}

func (l *locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.taking.Wait()
	l.mu.Lock()
	held := l.held
	l.held = map[string]*lock{}
	l.mu.Unlock()
	l.cancel()
	<-l.done
	var errs []error
	for _, lk := range held {
		lk.Interrupt(sessions.ReasonLockLost)
		errs = append(errs, l.b.write(context.Background(), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(context.Background(), `DELETE FROM locks WHERE holder = ?`, lk.holder)
			return err
		}))
	}
	return errors.Join(errs...)
}

// watch checks the held locks every poll until ctx ends: it interrupts
// those another holder asked for and those that were lost, and renews
// their leases every third of LockLease.
func (l *locker) watch(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(l.poll)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		held := make([]*lock, 0, len(l.held))
		for _, lk := range l.held {
			held = append(held, lk)
		}
		l.mu.Unlock()
		if len(held) == 0 {
			renewed = time.Now()
			continue
		}
		if time.Since(renewed) >= LockLease/3 {
			if err := l.renew(ctx, held); err == nil {
				renewed = time.Now()
			}
		}
		l.check(ctx, held)
	}
}

// holderArgs returns the holder tokens of held as query arguments and
// their placeholders.
func holderArgs(held []*lock) ([]any, string) {
	args := make([]any, len(held))
	for i, lk := range held {
		args[i] = lk.holder
	}
	return args, "?" + strings.Repeat(", ?", len(held)-1)
}

// renew extends the leases of held.
func (l *locker) renew(ctx context.Context, held []*lock) error {
	args, marks := holderArgs(held)
	return l.b.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE locks SET expires = ? WHERE holder IN (`+marks+`)`,
			append([]any{time.Now().Add(LockLease).UnixNano()}, args...)...)
		return err
	})
}

// check interrupts the locks of held that another holder asked for or
// that are no longer held (their lease ran out and another holder took
// them).
func (l *locker) check(ctx context.Context, held []*lock) {
	args, marks := holderArgs(held)
	found := map[string]sql.NullString{}
	err := l.b.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT holder, interrupt FROM locks WHERE holder IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var holder string
			var reason sql.NullString
			if err := rows.Scan(&holder, &reason); err != nil {
				return err
			}
			found[holder] = reason
		}
		return rows.Err()
	})
	if err != nil {
		return // the next poll tries again; the lease outlasts a few
	}
	for _, lk := range held {
		reason, ok := found[lk.holder]
		switch {
		case !ok:
			l.mu.Lock()
			delete(l.held, lk.holder)
			l.mu.Unlock()
			lk.Interrupt(sessions.ReasonLockLost)
		case reason.Valid:
			lk.Interrupt(reason.String)
		}
	}
}
