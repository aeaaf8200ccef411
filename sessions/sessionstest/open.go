package sessionstest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// testOpenRace opens one new id from several stores at once, each over
// its own handle on the storage (as separate processes would): every
// open succeeds, creating or resuming, and exactly one creates. Open is
// create-or-resume whatever the interleaving: a create that loses to
// another handle resumes the session it created.
func testOpenRace(t *testing.T, open opener) {
	var hs []*harness
	for range 3 {
		h, _ := open()
		hs = append(hs, h)
	}
	openRace(t, hs)
}

// testOpenConcurrently is testOpenRace within one Store: several
// goroutines open one new id at once.
func testOpenConcurrently(h *harness) {
	openRace(h.t, []*harness{h})
}

// openRace opens new ids from six goroutines spread over the harnesses,
// each harness with its own Store, and checks that every open succeeds
// and exactly one creates.
func openRace(t *testing.T, hs []*harness) {
	var sts []*sessions.Store
	for _, h := range hs {
		st, err := sessions.NewStore(h.b)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	const openers = 6
	for round := range 10 {
		id := fmt.Sprintf("open-race-%d", round)
		created := make([]bool, openers)
		errs := make([]error, openers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range openers {
			wg.Go(func() {
				<-start
				var o sessions.Opened
				o, errs[i] = sts[i%len(sts)].OpenWith(hs[0].ctx(), id, sessions.OpenOptions{MaxTurns: 7 + i%2})
				created[i] = o.Created
			})
		}
		close(start)
		wg.Wait()
		n := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: open %d of a new id: %v", round, i, err)
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d opens report creating the session, want 1", round, n)
		}
		rec, err := hs[0].b.Load(hs[0].ctx(), id)
		if err != nil || rec.Status != sessions.StatusActive {
			t.Fatalf("round %d: Load = %+v, %v", round, rec, err)
		}
	}
}

// testOpenReopened: Store.Open of a session stored by another Store (as
// by an earlier process) reports its turns and cap as stored.
func testOpenReopened(t *testing.T, open opener) {
	h, closeFirst := open()
	st, err := sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := st.Open(h.ctx(), "s", 4); err != nil || o != (sessions.Opened{Created: true, MaxTurns: 4}) {
		t.Fatalf("first Open = %+v, %v", o, err)
	}
	if _, err := st.Apply(h.ctx(), "s", &sessions.Change{AddTurns: 3}); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(); err != nil {
		t.Fatal(err)
	}
	closeFirst()
	h2, _ := open()
	st2, err := sessions.NewStore(h2.b)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := st2.Open(h2.ctx(), "s", 0); err != nil || o != (sessions.Opened{Turns: 3, MaxTurns: 4}) {
		t.Fatalf("Open in a new process = %+v, %v (want 3 turns and the cap 4)", o, err)
	}
}
