package sessionstest

import (
	"fmt"

	"github.com/skein-dev/skein/sessions"
)

// batch builds the changes of one multi-change Write against want's
// session: each change is made (by its func) and applied to a copy of
// want, so it is stamped and positioned after the ones before it, as the
// store stages a loop step's changes.
func batch(want *sessions.Record, makes ...func(next *sessions.Record) *sessions.Change) (*sessions.Record, []*sessions.Change) {
	next := cloneRecord(want)
	changes := make([]*sessions.Change, len(makes))
	for i, mk := range makes {
		changes[i] = mk(next)
		apply(next, changes[i])
	}
	return next, changes
}

// testWriteBatch writes several changes in one Write: they apply in
// order, the version moves once per change, and a stale base or an
// impossible change anywhere in the batch writes none of them.
func testWriteBatch(h *harness) {
	ctx := h.ctx()
	want := h.create(newRecord("s", at(0)))
	hist := history{}
	hb, _ := h.b.(sessions.HistoryBackend)
	summary := "so far"
	steps := [][]func(*sessions.Record) *sessions.Change{
		// A loop step: the prompt, a turn_start, the reply, its tool call.
		{
			func(r *sessions.Record) *sessions.Change {
				ch := appendLogged(r, at(1), len(r.Messages), users("prompt", 1))
				ch.AddTurns = 1
				return ch
			},
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{Events: stamp(r, at(1), sessions.Event{Type: "turn_start"}), UpdatedAt: at(1)}
			},
			func(r *sessions.Record) *sessions.Change {
				return appendLogged(r, at(2), len(r.Messages), richMessages()[2:3])
			},
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{Events: stamp(r, at(2), richEvents()[1]), UpdatedAt: at(2)}
			},
		},
		// Every kind of edit, in one batch: trim, reset, append, summary,
		// status, turn cap.
		{
			func(r *sessions.Record) *sessions.Change {
				return appendLogged(r, at(3), len(r.Messages), users("a", 4))
			},
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{DropFirst: 2, Status: sessions.StatusError, MaxTurns: 7, UpdatedAt: at(4)}
			},
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{SetSummary: true, Summary: &summary, AddTurns: 2}
			},
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{Replace: true, ReplaceWith: users("r", 2), Status: sessions.StatusActive}
			},
			func(r *sessions.Record) *sessions.Change {
				return appendLogged(r, at(5), len(r.Messages), users("b", 2))
			},
			func(r *sessions.Record) *sessions.Change { return &sessions.Change{SetSummary: true} },
		},
		// A rewind between appends, and a rewind undone by a reset.
		{
			func(r *sessions.Record) *sessions.Change {
				return appendLogged(r, at(6), len(r.Messages), users("d", 3))
			},
			func(r *sessions.Record) *sessions.Change { return &sessions.Change{DropLast: 2} },
			func(r *sessions.Record) *sessions.Change {
				return appendLogged(r, at(6), len(r.Messages), users("e", 1))
			},
		},
		{
			func(r *sessions.Record) *sessions.Change { return &sessions.Change{DropLast: 1} },
			func(r *sessions.Record) *sessions.Change {
				return &sessions.Change{Replace: true, ReplaceWith: users("f", 2), SetTitle: true, Title: "reset"}
			},
		},
		// One change alone, and none.
		{func(r *sessions.Record) *sessions.Change {
			return appendLogged(r, at(6), len(r.Messages), users("c", 1))
		}},
		{},
	}
	for i, step := range steps {
		next, changes := batch(want, step...)
		if err := h.b.Write(ctx, "s", want.Version, changes...); err != nil {
			h.t.Fatalf("batch %d: Write of %d changes: %v", i, len(changes), err)
		}
		if next.Version != want.Version+int64(len(changes)) {
			h.t.Fatalf("batch %d: the reference version moved by %d, want %d", i, next.Version-want.Version, len(changes))
		}
		want = next
		h.check(want)
		for _, ch := range changes {
			hist.note(ch)
		}
		if hb != nil {
			h.checkHistory(hb, want, hist)
		}
	}

	// A stale base writes nothing of the batch.
	_, changes := batch(want,
		func(r *sessions.Record) *sessions.Change {
			return appendLogged(r, at(7), len(r.Messages), users("x", 1))
		},
		func(r *sessions.Record) *sessions.Change { return &sessions.Change{AddTurns: 1} })
	err := h.b.Write(ctx, "s", want.Version-1, changes...)
	h.wantErr(fmt.Sprintf("batch Write at base %d (stored %d)", want.Version-1, want.Version), err, sessions.ErrConflict, "s")
	h.check(want)

	// A change the session cannot take, after good ones, writes nothing.
	n := len(want.Messages)
	_, changes = batch(want,
		func(r *sessions.Record) *sessions.Change {
			return appendLogged(r, at(8), len(r.Messages), users("y", 2))
		},
		func(r *sessions.Record) *sessions.Change {
			return &sessions.Change{AddTurns: 1, Status: sessions.StatusError}
		},
	)
	changes = append(changes, &sessions.Change{DropFirst: n + 3})
	if err := h.b.Write(ctx, "s", want.Version, changes...); err == nil {
		h.t.Fatalf("batch Write whose last change drops %d of %d messages: no error", n+3, n+2)
	}
	h.check(want)
	if hb != nil {
		h.checkHistory(hb, want, hist)
	}
}
