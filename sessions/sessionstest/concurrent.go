package sessionstest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// writers is how many goroutines race in the concurrency tests.
const writers = 8

// turnChange is one agent turn for a concurrency test: an assistant tool
// call, its result and an event. A write that interleaved with another
// would leave a tool call without its result next to it, which
// message.Validate reports.
func turnChange(rec *sessions.Record, tag string) *sessions.Change {
	return &sessions.Change{
		Append: []message.Message{
			{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: tag, Name: "work", Arguments: map[string]any{"tag": tag}}}},
			{Role: message.RoleTool, ToolCallID: tag, Name: "work", Text: "done " + tag},
		},
		Events:   stamp(rec, at(1), sessions.Event{Type: "turn_end", CorrID: tag}),
		AddTurns: 1,
	}
}

// race runs fn(i) for i in [0, writers) at once and returns their errors.
func race(fn func(i int) error) []error {
	errs := make([]error, writers)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-gate
			errs[i] = fn(i)
		})
	}
	close(gate)
	wg.Wait()
	return errs
}

// oneWinner fails the test unless exactly one of errs is nil and the
// others wrap loser; it returns the winner's index.
func (h *harness) oneWinner(op string, errs []error, loser error) int {
	h.t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			h.t.Fatalf("%s: writers %d and %d both succeeded", op, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, loser):
			h.t.Fatalf("%s: writer %d: got %v, want an error wrapping %v", op, i, err, loser)
		}
	}
	if winner < 0 {
		h.t.Fatalf("%s: no writer succeeded", op)
	}
	return winner
}

func testConcurrentWriters(h *harness) {
	ctx := h.ctx()

	// Writers on different sessions never conflict.
	wants := make([]*sessions.Record, writers)
	for i := range wants {
		wants[i] = h.create(newRecord(fmt.Sprintf("own%d", i), at(i)))
	}
	changes := make([]*sessions.Change, writers)
	for i := range changes {
		changes[i] = turnChange(wants[i], fmt.Sprintf("own%d", i))
	}
	for i, err := range race(func(i int) error { return h.b.Write(ctx, wants[i].ID, 0, changes[i]) }) {
		if err != nil {
			h.t.Fatalf("writer %d on its own session: %v", i, err)
		}
		apply(wants[i], changes[i])
		h.check(wants[i])
	}

	// Writers on one session at one base version: exactly one wins.
	want := h.create(newRecord("s", at(0)))
	for round := range 5 {
		base := want.Version
		for i := range changes {
			changes[i] = turnChange(want, fmt.Sprintf("r%dw%d", round, i))
		}
		errs := race(func(i int) error { return h.b.Write(ctx, "s", base, changes[i]) })
		w := h.oneWinner(fmt.Sprintf("round %d", round), errs, sessions.ErrConflict)
		apply(want, changes[w])
		h.check(want)
	}

	// Writers that reload and retry on conflict: every write lands once,
	// each on a distinct base version.
	const perWriter = 4
	start := want.Version
	bases := make([][]int64, writers)
	errs := race(func(i int) error {
		for n := 0; n < perWriter; {
			rec, err := h.b.Load(ctx, "s")
			if err != nil {
				return err
			}
			err = h.b.Write(ctx, "s", rec.Version, turnChange(rec, fmt.Sprintf("w%dn%d", i, n)))
			switch {
			case err == nil:
				bases[i] = append(bases[i], rec.Version)
				n++
			case !errors.Is(err, sessions.ErrConflict):
				return err
			}
		}
		return nil
	})
	seen := map[int64]int{}
	for i, err := range errs {
		if err != nil {
			h.t.Fatalf("retrying writer %d: %v", i, err)
		}
		for _, b := range bases[i] {
			if j, ok := seen[b]; ok {
				h.t.Fatalf("writers %d and %d both wrote at base version %d", j, i, b)
			}
			seen[b] = i
		}
	}
	got, err := h.b.Load(ctx, "s")
	if err != nil {
		h.t.Fatal(err)
	}
	if n := start + writers*perWriter; got.Version != n {
		h.t.Fatalf("version after the race: %d, want %d", got.Version, n)
	}
	if n := len(want.Messages) + 2*writers*perWriter; len(got.Messages) != n {
		h.t.Fatalf("%d messages after the race, want %d", len(got.Messages), n)
	}
	if err := message.Validate(got.Messages); err != nil {
		h.t.Fatalf("transcript after the race is not valid: %v", err)
	}
	for i, e := range got.Events {
		if e.Seq != int64(i+1) {
			h.t.Fatalf("event %d has seq %d after the race", i, e.Seq)
		}
	}
	if got.Turns != len(got.Messages)/2 {
		h.t.Fatalf("turns %d after the race, want %d", got.Turns, len(got.Messages)/2)
	}
}

func testConcurrentForks(h *harness) {
	ctx := h.ctx()
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 4)
	p := h.create(rec)

	specs := make([]*sessions.ForkSpec, writers)
	children := make([]*sessions.Record, writers)
	for i := range specs {
		specs[i], children[i] = forkSpec(p, fmt.Sprintf("c%d", i), i%5, at(1))
	}
	w := h.oneWinner("forks at one version", race(func(i int) error { return h.b.Fork(ctx, specs[i]) }), sessions.ErrConflict)
	applyFork(p, specs[w])
	h.check(p)
	h.check(children[w])
	for i := range specs {
		if ok, err := h.b.Exists(ctx, specs[i].Dst.ID); i != w && (err != nil || ok) {
			h.t.Fatalf("a losing fork stored %q: %v, %v", specs[i].Dst.ID, ok, err)
		}
	}

	// Forks onto one new id: one wins; the others find the source changed
	// or the id taken.
	for i := range specs {
		specs[i], children[i] = forkSpec(p, "same", 2, at(2))
	}
	errs := race(func(i int) error { return h.b.Fork(ctx, specs[i]) })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			h.t.Fatalf("two forks onto one id both succeeded")
		case !errors.Is(err, sessions.ErrConflict) && !errors.Is(err, sessions.ErrExists):
			h.t.Fatalf("fork %d onto a raced id: %v", i, err)
		}
	}
	if winner < 0 {
		h.t.Fatalf("no fork onto a raced id succeeded")
	}
	applyFork(p, specs[winner])
	h.check(p)
	h.check(children[winner])

	// Creates of one id: one wins, the others get ErrExists.
	recs := make([]*sessions.Record, writers)
	for i := range recs {
		recs[i] = newRecord("new", at(i))
		recs[i].Messages = users(fmt.Sprintf("w%d-", i), 2)
	}
	w = h.oneWinner("creates of one id", race(func(i int) error { return h.b.Create(ctx, cloneRecord(recs[i])) }), sessions.ErrExists)
	h.check(recs[w])
}
