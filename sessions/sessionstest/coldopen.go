package sessionstest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// testColdOpens opens many stored sessions at once through a new Store
// (cold: none is live) that holds fewer than that, each from two
// goroutines, every opener appending to its session: every open
// succeeds, the sessions left with open tool calls are healed once, and
// every append is stored, in a valid transcript.
func testColdOpens(t *testing.T, open opener) {
	h, _ := open()
	const n, capacity = 24, 8
	first, err := sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprint("cold-", i)
		if _, err := first.Open(h.ctx(), id, 0); err != nil {
			t.Fatal(err)
		}
		ch := &sessions.Change{Append: []message.Message{user("hello " + id)}}
		if i%3 == 0 { // left with an open call, as by a crash
			ch.Append = append(ch.Append, message.Message{Role: message.RoleAssistant,
				ToolCalls: []message.ToolCall{{ID: "c" + id, Name: "work", Arguments: map[string]any{}}}})
		}
		if _, err := first.Apply(h.ctx(), id, ch); err != nil {
			t.Fatal(err)
		}
	}
	cold, err := sessions.NewStore(h.b, sessions.WithCap(capacity))
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 2 * n {
		wg.Go(func() {
			<-start
			id := fmt.Sprint("cold-", g%n)
			if _, err := cold.Open(h.ctx(), id, 0); err != nil {
				errs[g] = err
				return
			}
			if _, err := cold.Stage(h.ctx(), id, &sessions.Change{Append: []message.Message{user(fmt.Sprint("from ", g))}}); err != nil {
				errs[g] = err
				return
			}
			errs[g] = cold.Commit(h.ctx(), id)
		})
	}
	close(start)
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", g, err)
		}
	}
	if err := cold.CommitAll(h.ctx()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprint("cold-", i)
		rec, err := h.b.Load(h.ctx(), id)
		if err != nil {
			t.Fatal(err)
		}
		want := 3 // hello and two appends
		if i%3 == 0 {
			want += 2 // the open call and its healing result
		}
		if len(rec.Messages) != want {
			t.Fatalf("%s: %d messages, want %d: %s", id, len(rec.Messages), want, texts(rec.Messages))
		}
		if err := message.Validate(rec.Messages); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// testOpenEvictSameID races opens, writes, unloads and the eviction of
// one session (the Store holds two sessions, and other sessions are
// opened meanwhile): no write is lost or refused.
func testOpenEvictSameID(t *testing.T, open opener) {
	h, _ := open()
	st, err := sessions.NewStore(h.b, sessions.WithCap(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(h.ctx(), "x", 0); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 6, 15
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				var err error
				text := fmt.Sprint(w, "/", r)
				switch w % 3 {
				case 0: // staged, committed
					if _, err = st.Stage(h.ctx(), "x", &sessions.Change{Append: []message.Message{user(text)}}); err == nil {
						err = st.Commit(h.ctx(), "x")
					}
				case 1: // written, then unloaded
					if _, err = st.Apply(h.ctx(), "x", &sessions.Change{Append: []message.Message{user(text)}}); err == nil {
						st.Unload("x")
					}
				case 2: // another session pushes x out; x is opened again
					if _, err = st.Open(h.ctx(), fmt.Sprint("y-", w, "-", r%3), 0); err == nil {
						_, err = st.Open(h.ctx(), "x", 0)
					}
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	if err := st.CommitAll(h.ctx()); err != nil {
		t.Fatal(err)
	}
	rec, err := h.b.Load(h.ctx(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * rounds * workers / 3; len(rec.Messages) != want {
		t.Fatalf("stored %d messages, want %d", len(rec.Messages), want)
	}
}
