package sessionstest

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

func testFork(h *harness) {
	summary := "parent summary"
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 6)
	rec.Summary = &summary
	rec.MaxTurns = 8
	rec.Events = stamp(rec, at(0), sessions.Event{Type: "x"})
	p := h.create(rec)

	// A whole fork, as agent_session_fork makes it: no branch point, the
	// summary copied.
	spec, full := forkSpec(p, "full", 6, at(1))
	spec.Dst.BranchedAt, full.BranchedAt = nil, nil
	spec.Dst.Summary, full.Summary = &summary, &summary
	h.doFork(p, spec)
	h.check(full)

	at2 := h.fork(p, "at2", 2, at(2))
	zero := h.fork(p, "zero", 0, at(3))
	if !slices.Equal(p.ChildIDs, []string{"full", "at2", "zero"}) {
		h.t.Fatalf("oracle ChildIDs %v", p.ChildIDs)
	}
	h.check(p)
	h.check(full)
	h.check(at2)
	h.check(zero)

	// A fork of a fork of a fork keeps lineage at each level.
	g := h.fork(at2, "g", 1, at(4))
	gg := h.fork(g, "gg", 1, at(5))
	h.check(at2)
	h.check(g)
	h.check(gg)
}

func testForkErrors(h *harness) {
	ctx := h.ctx()
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 3)
	p := h.create(rec)
	h.write(p, &sessions.Change{Append: users("q", 1)})
	other := h.create(newRecord("taken", at(0)))

	spec, _ := forkSpec(p, "c", 2, at(1))
	spec.SrcVersion = p.Version - 1
	h.wantErr("Fork at a stale version", h.b.Fork(ctx, spec), sessions.ErrConflict, "p")

	spec, _ = forkSpec(p, "taken", 2, at(1))
	h.wantErr("Fork onto an existing id", h.b.Fork(ctx, spec), sessions.ErrExists, "taken")

	spec, _ = forkSpec(p, "p", 2, at(1))
	h.wantErr("Fork onto its own id", h.b.Fork(ctx, spec), sessions.ErrExists, "p")

	for _, keep := range []int{5, -1} {
		spec, _ = forkSpec(p, "c", keep, at(1))
		if err := h.b.Fork(ctx, spec); err == nil {
			h.t.Fatalf("Fork keeping %d of 4 messages: no error", keep)
		}
	}
	h.check(p)
	h.check(other)
	if ok, err := h.b.Exists(ctx, "c"); err != nil || ok {
		h.t.Fatalf("a failed Fork stored its child: Exists(c) = %v, %v", ok, err)
	}
}

// testForkIsolation checks that writes to a parent never show in its fork
// and the other way round.
func testForkIsolation(h *harness) {
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 10)
	p := h.create(rec)
	c := h.fork(p, "c", 6, at(1))
	both := func() {
		h.t.Helper()
		h.check(p)
		h.check(c)
	}

	h.write(p, &sessions.Change{Append: users("pa", 3)})
	both()
	h.write(p, &sessions.Change{DropFirst: 4})
	both()
	h.write(p, &sessions.Change{DropFirst: 7}) // past the shared part
	both()
	h.write(p, &sessions.Change{Replace: true, ReplaceWith: users("pr", 2)})
	both()
	h.write(p, &sessions.Change{Replace: true})
	both()

	h.write(c, &sessions.Change{Append: users("ca", 2)})
	both()
	h.write(c, &sessions.Change{DropFirst: 2})
	both()
	h.write(c, &sessions.Change{DropFirst: 4, Append: users("cb", 1)})
	both()
	h.write(c, &sessions.Change{Replace: true, ReplaceWith: users("cr", 3)})
	both()
	h.write(p, &sessions.Change{Append: users("pb", 2)})
	both()
}

// testForkDropLast drops the newest messages (a rewind) on both sides of
// a fork, inside and past the shared part, with appends after each, and
// forks a rewound session.
func testForkDropLast(h *harness) {
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 8)
	p := h.create(rec)
	c := h.fork(p, "c", 6, at(1))
	all := []*sessions.Record{p, c}
	check := func() {
		h.t.Helper()
		for _, r := range all {
			h.check(r)
		}
	}
	for _, step := range []struct {
		r  *sessions.Record
		ch *sessions.Change
	}{
		{p, &sessions.Change{DropLast: 1}},
		{p, &sessions.Change{Append: users("pa", 2)}},
		{c, &sessions.Change{Append: users("ca", 3)}},
		{c, &sessions.Change{DropLast: 2}},                         // its own rows
		{c, &sessions.Change{DropLast: 3, Append: users("cb", 1)}}, // into the shared part
		{p, &sessions.Change{DropLast: 9}},                         // everything
		{p, &sessions.Change{Append: users("pc", 2)}},
		{c, &sessions.Change{DropFirst: 1}},
		{c, &sessions.Change{DropLast: 1}},
	} {
		h.write(step.r, step.ch)
		check()
	}
	g := h.fork(c, "g", 3, at(2))
	all = append(all, g)
	h.write(c, &sessions.Change{DropLast: 2, Append: users("cc", 2)})
	check()
	h.write(g, &sessions.Change{DropLast: 3})
	check()
	h.write(g, &sessions.Change{Append: users("ga", 1)})
	check()
}

// testForkGrandchildren forks at points inside and across the shared
// part, after trims that move it, and checks every generation after
// writes to every other.
func testForkGrandchildren(h *harness) {
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 8)
	p := h.create(rec)
	c := h.fork(p, "c", 8, at(1))
	h.write(c, &sessions.Change{Append: users("c", 4)}) // p0..p7 c0..c3
	g1 := h.fork(c, "g1", 5, at(2))                     // inside the shared part
	g2 := h.fork(c, "g2", 10, at(3))                    // across it
	h.write(c, &sessions.Change{DropFirst: 3})          // p3..p7 c0..c3
	g3 := h.fork(c, "g3", 6, at(4))                     // p3..p7 c0
	h.write(c, &sessions.Change{DropFirst: 6})          // c1..c3
	g4 := h.fork(c, "g4", 2, at(5))                     // c1 c2
	gg := h.fork(g2, "gg", 10, at(6))
	h.write(g2, &sessions.Change{Append: users("g2", 1)})
	gg2 := h.fork(g2, "gg2", 11, at(7))
	all := []*sessions.Record{p, c, g1, g2, g3, g4, gg, gg2}
	checkAll := func() {
		h.t.Helper()
		for _, r := range all {
			h.check(r)
		}
	}
	checkAll()

	h.write(p, &sessions.Change{Replace: true, ReplaceWith: users("pr", 1)})
	checkAll()
	h.write(c, &sessions.Change{Replace: true, ReplaceWith: users("cr", 1)})
	checkAll()
	h.write(g2, &sessions.Change{DropFirst: 9})
	checkAll()
	h.write(gg, &sessions.Change{DropFirst: 1, Append: users("gg", 1)})
	checkAll()
	h.write(g1, &sessions.Change{Append: users("g1", 2)})
	checkAll()
	if !slices.Equal(c.ChildIDs, []string{"g1", "g2", "g3", "g4"}) || gg.ParentID != "g2" {
		h.t.Fatalf("oracle lineage: %v %q", c.ChildIDs, gg.ParentID)
	}
}

// testForkModel runs random appends, trims, resets, forks and deletes over
// a family of sessions and compares every session with the reference
// semantics.
func testForkModel(h *harness) {
	const steps = 300
	rng := rand.New(rand.NewPCG(7, 11))
	wants := map[string]*sessions.Record{}
	var ids []string
	n, msg := 0, 0
	add := func(r *sessions.Record) {
		wants[r.ID] = r
		ids = append(ids, r.ID)
	}
	newID := func() string { n++; return fmt.Sprintf("s%03d", n) }
	fresh := func(k int) []message.Message {
		out := make([]message.Message, k)
		for i := range out {
			out[i] = user(fmt.Sprintf("m%d", msg))
			msg++
		}
		return out
	}
	add(h.create(newRecord(newID(), at(0))))
	for step := range steps {
		w := wants[ids[rng.IntN(len(ids))]]
		length := len(w.Messages)
		var ch *sessions.Change
		switch op := rng.IntN(20); {
		case op < 8:
			ch = &sessions.Change{Append: fresh(1 + rng.IntN(4))}
		case op < 11 && length > 0:
			ch = &sessions.Change{DropFirst: 1 + rng.IntN(length)}
		case op < 13:
			ch = &sessions.Change{Replace: true, ReplaceWith: fresh(rng.IntN(4)), Append: fresh(rng.IntN(2))}
		case op < 18 && len(ids) < 24:
			add(h.fork(w, newID(), rng.IntN(length+1), at(step)))
			continue
		case op < 20 && len(w.ChildIDs) == 0 && len(ids) > 1:
			if err := h.b.Delete(h.ctx(), w.ID, false); err != nil {
				h.t.Fatalf("step %d: Delete(%q): %v", step, w.ID, err)
			}
			delete(wants, w.ID)
			ids = slices.DeleteFunc(ids, func(id string) bool { return id == w.ID })
			if p, ok := wants[w.ParentID]; ok {
				p.ChildIDs = slices.DeleteFunc(p.ChildIDs, func(id string) bool { return id == w.ID })
			}
		default:
			ch = &sessions.Change{Append: fresh(1)}
		}
		if ch != nil {
			h.write(w, ch)
		}
		if step%10 == 0 {
			for _, id := range ids {
				h.check(wants[id])
			}
		}
	}
	for _, id := range ids {
		h.check(wants[id])
	}
}
