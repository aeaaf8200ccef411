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
				created[i], errs[i] = sts[i%len(sts)].OpenWith(hs[0].ctx(), id, sessions.OpenOptions{MaxTurns: 7 + i%2})
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
