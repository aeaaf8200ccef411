package sessions

import (
	"context"
	"fmt"
	"github.com/skein-dev/skein/sessions/message"
	"sync"
	"testing"
	"time"
)

// gatedBackend is a durable memory backend whose Load, Create and Write
// of the ids in gated wait at a barrier until n of them are in flight at
// once (or the wait times out, which they report): a store that holds
// one lock across those round trips never gets them all in flight.
type gatedBackend struct {
	*MemoryBackend
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	gated   map[string]bool
}

func newGatedBackend(n int) *gatedBackend {
	return &gatedBackend{MemoryBackend: NewMemoryBackend(), n: n, all: make(chan struct{}), gated: map[string]bool{}}
}

func (b *gatedBackend) Durable() bool { return true }

// gate waits for n calls to be in flight.
func (b *gatedBackend) gate(id string) error {
	b.mu.Lock()
	if !b.gated[id] {
		b.mu.Unlock()
		return nil
	}
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("session %s: its backend call waited 5s for the others: they do not overlap", id)
	}
}

func (b *gatedBackend) Load(ctx context.Context, id string) (*Record, error) {
	if err := b.gate(id); err != nil {
		return nil, err
	}
	return b.MemoryBackend.Load(ctx, id)
}

func (b *gatedBackend) Create(ctx context.Context, rec *Record) error {
	if err := b.gate(rec.ID); err != nil {
		return err
	}
	return b.MemoryBackend.Create(ctx, rec)
}

func (b *gatedBackend) Write(ctx context.Context, id string, base int64, changes ...*Change) error {
	if err := b.gate(id); err != nil {
		return err
	}
	return b.MemoryBackend.Write(ctx, id, base, changes...)
}

// gateIDs makes the calls of ids wait at the barrier of n.
func (b *gatedBackend) gateIDs(n int, ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n, b.arrived, b.all = n, 0, make(chan struct{})
	clear(b.gated)
	for _, id := range ids {
		b.gated[id] = true
	}
}

// all runs fn(i) for i in [0, n) at once and fails t with their errors.
func runAll(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%d: %v", i, err)
		}
	}
}

// TestColdOpensOverlap: cold loads and creates of different sessions run
// their backend round trips at the same time, each under its session's
// lock only (with one lock across them, the barrier times out).
func TestColdOpensOverlap(t *testing.T) {
	const n = 8
	b := newGatedBackend(n)
	s := newTestStore(t, b, 2*n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("s", i)
	}
	b.gateIDs(n, ids...)
	runAll(t, n, func(i int) error { _, err := s.Open(ctx, ids[i], 0); return err }) // create
	for _, id := range ids {
		s.Unload(id)
	}
	b.gateIDs(n, ids...)
	runAll(t, n, func(i int) error { _, err := s.Open(ctx, ids[i], 0); return err }) // cold load
	if len(s.Live()) != n {
		t.Fatalf("%d live sessions, want %d", len(s.Live()), n)
	}
}

// blockingBackend is a durable memory backend whose Write of session
// "slow" waits until release is closed.
type blockingBackend struct {
	*MemoryBackend
	started chan struct{}
	release chan struct{}
}

func (b *blockingBackend) Durable() bool { return true }

func (b *blockingBackend) Write(ctx context.Context, id string, base int64, changes ...*Change) error {
	if id == "slow" {
		close(b.started)
		<-b.release
	}
	return b.MemoryBackend.Write(ctx, id, base, changes...)
}

// TestEvictCommitDoesNotBlockOthers: while the commit of a session
// leaving the LRU waits on the backend, other sessions are opened, loaded
// and created; the commit then lands, and the session's next use sees it.
func TestEvictCommitDoesNotBlockOthers(t *testing.T) {
	b := &blockingBackend{MemoryBackend: NewMemoryBackend(), started: make(chan struct{}), release: make(chan struct{})}
	s := newTestStore(t, b, 1)
	mustOpen(t, s, "cold")
	mustOpen(t, s, "slow") // "cold" leaves the LRU (nothing staged)
	if _, err := s.Stage(ctx, "slow", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "staged"}}}); err != nil {
		t.Fatal(err)
	}
	evicted := make(chan error, 1)
	go func() { _, err := s.Open(ctx, "other", 0); evicted <- err }() // pushes "slow" out: its commit blocks
	<-b.started
	done := make(chan error, 1)
	go func() {
		if _, err := s.Open(ctx, "cold", 0); err != nil { // a cold load
			done <- err
			return
		}
		done <- s.Create(ctx, "new", Info{})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cold open waits for another session's evict-and-commit")
	}
	// The slow session's own use waits for its commit, then sees it.
	got := make(chan int, 1)
	go func() {
		msgs, err := s.Messages(ctx, "slow")
		if err != nil {
			t.Error(err)
		}
		got <- len(msgs)
	}()
	select {
	case n := <-got:
		t.Fatalf("the session being committed was used before its commit ended (%d messages)", n)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.release)
	if err := <-evicted; err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 1 {
		t.Fatalf("after its commit the session has %d messages, want 1", n)
	}
	if err := s.Commit(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenEvictSameID: opens, writes and unloads of one session race
// (with more sessions than the LRU holds, so it is also pushed out): no
// write is lost and the transcript stays valid.
func TestOpenEvictSameID(t *testing.T) {
	s := newTestStore(t, durableMemory{NewMemoryBackend()}, 2)
	mustOpen(t, s, "x")
	const workers, rounds = 6, 40
	runAll(t, workers, func(w int) error {
		for r := range rounds {
			switch w % 3 {
			case 0:
				if _, err := s.Stage(ctx, "x", &Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint(w, "/", r)}}}); err != nil {
					return err
				}
				if err := s.Commit(ctx, "x"); err != nil {
					return err
				}
			case 1:
				if _, err := s.Apply(ctx, "x", &Change{Append: []message.Message{{Role: message.RoleUser, Text: fmt.Sprint(w, "/", r)}}}); err != nil {
					return err
				}
				s.Unload("x")
			case 2:
				if _, err := s.Open(ctx, fmt.Sprint("y", w, "-", r%3), 0); err != nil { // pushes x out
					return err
				}
				if _, err := s.Open(ctx, "x", 0); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err := s.CommitAll(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Backend().Load(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * rounds * workers / 3; len(rec.Messages) != want {
		t.Fatalf("stored %d messages, want %d", len(rec.Messages), want)
	}
}

// TestIDLockContext: a free id lock is taken with a done context (the
// backend decides what that means, as before id locks); a wait for a
// held one ends with the context, with its cause.
func TestIDLockContext(t *testing.T) {
	var l idLocks
	done, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("test deadline"))
	for range 20 {
		unlock, err := l.lock(done, "a")
		if err != nil {
			t.Fatalf("a free lock with a done context: %v", err)
		}
		unlock()
	}
	unlock, _ := l.lock(context.Background(), "a")
	if _, err := l.lock(done, "a"); err == nil || err.Error() != "test deadline" {
		t.Fatalf("waiting with a done context: %v, want its cause", err)
	}
	unlock()
	if len(l.m) != 0 {
		t.Fatalf("%d lock entries left", len(l.m))
	}
}
