package sessions

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

// TestRefuseWhenFull: a memory store told to RefuseWhenFull refuses every
// kind of new session once it holds its cap, with ErrFull naming the cap,
// writing nothing (no fork event on the source, no child); no session is
// lost; a session that ends makes room again.
func TestRefuseWhenFull(t *testing.T) {
	s := newTestStore(t, NewMemoryBackend(), 3)
	s.RefuseWhenFull()
	for _, id := range []string{"a", "b"} {
		if err := s.Create(ctx, id, Info{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, "a", "c", ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Snapshot(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	for name, create := range map[string]func() error{
		"Create":   func() error { return s.Create(ctx, "d", Info{}) },
		"Open":     func() error { _, err := s.Open(ctx, "d", 0); return err },
		"OpenWith": func() error { _, err := s.OpenWith(ctx, "d", OpenOptions{}); return err },
		"Fork":     func() error { _, err := s.Fork(ctx, "a", "d", ForkOptions{KeepFirst: -1}); return err },
	} {
		err := create()
		if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "session 'd'") || !strings.Contains(err.Error(), "holds 3 sessions") {
			t.Fatalf("%s past the cap: %v", name, err)
		}
	}
	// An existing session opens as ever.
	if _, err := s.Open(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if ok, _ := s.Exists(ctx, id); !ok {
			t.Fatalf("session %s lost", id)
		}
	}
	if ok, _ := s.Exists(ctx, "d"); ok {
		t.Fatal("a refused session exists")
	}
	after, err := s.Snapshot(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Events) != len(before.Events) || len(after.ChildIDs) != 1 {
		t.Fatalf("the refused fork wrote to its source: %d events (was %d), children %v", len(after.Events), len(before.Events), after.ChildIDs)
	}
	if err := s.Close(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "d", Info{}); err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
}

// TestRefuseWhenFullConcurrent: creations and forks racing for the last
// places of the cap: exactly as many succeed as there were places, the
// others get ErrFull, and every session created is still there.
func TestRefuseWhenFullConcurrent(t *testing.T) {
	const capacity, tries = 20, 60
	s := newTestStore(t, NewMemoryBackend(), capacity)
	s.RefuseWhenFull()
	if err := s.Create(ctx, "src", Info{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var made []string
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			id := fmt.Sprint("s", i)
			var err error
			if i%2 == 0 {
				err = s.Create(ctx, id, Info{})
			} else {
				_, err = s.Fork(ctx, "src", id, ForkOptions{KeepFirst: -1})
			}
			switch {
			case err == nil:
				mu.Lock()
				made = append(made, id)
				mu.Unlock()
			case !errors.Is(err, ErrFull):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(made) != capacity-1 {
		t.Fatalf("%d sessions created for %d places", len(made), capacity-1)
	}
	for _, id := range append(made, "src") {
		if ok, _ := s.Exists(ctx, id); !ok {
			t.Fatalf("session %s lost", id)
		}
	}
}

// TestRefuseWhenFullDurable: a durable store ignores RefuseWhenFull (its
// sessions leave memory and come back), and a memory store that was not
// told keeps its LRU behaviour.
func TestRefuseWhenFullDurable(t *testing.T) {
	durable := newTestStore(t, durableMemory{NewMemoryBackend()}, 1)
	durable.RefuseWhenFull()
	plain := newTestStore(t, NewMemoryBackend(), 1)
	for name, s := range map[string]*Store{"durable": durable, "not told": plain} {
		for _, id := range []string{"a", "b"} {
			if err := s.Create(ctx, id, Info{}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
}
