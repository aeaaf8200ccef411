package sessionstest

import (
	"fmt"

	"github.com/skein-dev/skein/sessions"
)

func testCreateLoad(h *harness) {
	ctx := h.ctx()
	if ok, err := h.b.Exists(ctx, "a"); err != nil || ok {
		h.t.Fatalf("Exists(a) before Create = %v, %v; want false, nil", ok, err)
	}
	summary, branched := "so far", 3
	rec := newRecord("a", at(0))
	rec.UpdatedAt = at(5)
	rec.Status = sessions.StatusCompleted
	rec.Summary = &summary
	rec.BranchedAt = &branched
	rec.Turns, rec.MaxTurns = 4, 9
	rec.Metadata = map[string]any{"n": int64(7), "f": 7.0, "list": []any{"x", 0.5}}
	rec.Title, rec.FirstPrompt = "A title: ünïcode", "the first prompt"
	rec.Messages = richMessages()
	rec.Events = stamp(rec, at(1), richEvents()...)
	want := h.create(rec)
	h.check(want)
	if ok, err := h.b.Exists(ctx, "a"); err != nil || !ok {
		h.t.Fatalf("Exists(a) after Create = %v, %v; want true, nil", ok, err)
	}

	// A minimal record: no metadata, summary, messages or events.
	bare := h.create(&sessions.Record{ID: "bare", Status: sessions.StatusActive, CreatedAt: at(2), UpdatedAt: at(2)})
	h.check(bare)

	again := newRecord("a", at(9))
	again.Messages = users("other", 2)
	h.wantErr("Create of an existing id", h.b.Create(ctx, again), sessions.ErrExists, "a")
	h.check(want)
}

func testNotFound(h *harness) {
	ctx := h.ctx()
	_, err := h.b.Load(ctx, "nope")
	h.wantErr("Load", err, sessions.ErrNotFound, "nope")
	_, err = h.b.LoadMeta(ctx, "nope")
	h.wantErr("LoadMeta", err, sessions.ErrNotFound, "nope")
	h.wantErr("Write", h.b.Write(ctx, "nope", 0, &sessions.Change{Append: users("m", 1)}), sessions.ErrNotFound, "nope")
	h.wantErr("Delete", h.b.Delete(ctx, "nope", false), sessions.ErrNotFound, "nope")
	h.wantErr("Delete recursive", h.b.Delete(ctx, "nope", true), sessions.ErrNotFound, "nope")
	spec, _ := forkSpec(newRecord("nope", at(0)), "child", 0, at(1))
	h.wantErr("Fork", h.b.Fork(ctx, spec), sessions.ErrNotFound, "nope")
	if ok, err := h.b.Exists(ctx, "nope"); err != nil || ok {
		h.t.Fatalf("Exists(nope) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := h.b.Exists(ctx, "child"); err != nil || ok {
		h.t.Fatalf("a failed Fork stored its child: Exists(child) = %v, %v", ok, err)
	}
}

// testWriteParts writes each part of a Change on its own.
func testWriteParts(h *harness) {
	want := h.create(newRecord("s", at(0)))
	summary := "the story so far"
	steps := []struct {
		name string
		ch   func() *sessions.Change
	}{
		{"append", func() *sessions.Change { return &sessions.Change{Append: users("a", 3)} }},
		{"append more", func() *sessions.Change { return &sessions.Change{Append: richMessages()} }},
		{"drop first", func() *sessions.Change { return &sessions.Change{DropFirst: 2} }},
		{"replace", func() *sessions.Change { return &sessions.Change{Replace: true, ReplaceWith: users("r", 2)} }},
		{"replace with nothing", func() *sessions.Change { return &sessions.Change{Replace: true} }},
		{"append after reset", func() *sessions.Change { return &sessions.Change{Append: users("b", 2)} }},
		{"events", func() *sessions.Change { return &sessions.Change{Events: stamp(want, at(1), richEvents()...)} }},
		{"more events", func() *sessions.Change {
			return &sessions.Change{Events: stamp(want, at(2), sessions.Event{Type: sessions.EventTrim})}
		}},
		{"set summary", func() *sessions.Change { return &sessions.Change{SetSummary: true, Summary: &summary} }},
		{"keep summary", func() *sessions.Change { return &sessions.Change{Summary: nil} }},
		{"clear summary", func() *sessions.Change { return &sessions.Change{SetSummary: true} }},
		{"status", func() *sessions.Change { return &sessions.Change{Status: sessions.StatusError} }},
		{"status back", func() *sessions.Change { return &sessions.Change{Status: sessions.StatusActive} }},
		{"add turns", func() *sessions.Change { return &sessions.Change{AddTurns: 2} }},
		{"add more turns", func() *sessions.Change { return &sessions.Change{AddTurns: 3} }},
		{"max turns", func() *sessions.Change { return &sessions.Change{MaxTurns: 12} }},
		{"updated at", func() *sessions.Change { return &sessions.Change{UpdatedAt: at(30)} }},
		{"title", func() *sessions.Change { return &sessions.Change{SetTitle: true, Title: "Refactor"} }},
		{"keep title", func() *sessions.Change { return &sessions.Change{Title: "ignored"} }},
		{"clear title", func() *sessions.Change { return &sessions.Change{SetTitle: true} }},
		{"metadata", func() *sessions.Change {
			return &sessions.Change{SetMetadata: true, Metadata: map[string]any{"repo": "api", "ctx": map[string]any{"line": int64(3)}}}
		}},
		{"keep metadata", func() *sessions.Change { return &sessions.Change{Metadata: map[string]any{"x": "ignored"}} }},
		{"clear metadata", func() *sessions.Change { return &sessions.Change{SetMetadata: true} }},
		{"first prompt", func() *sessions.Change { return &sessions.Change{SetFirstPrompt: true, FirstPrompt: "hello"} }},
		{"clear first prompt", func() *sessions.Change { return &sessions.Change{SetFirstPrompt: true} }},
		{"append for drop last", func() *sessions.Change { return &sessions.Change{Append: users("t", 4)} }},
		{"drop last", func() *sessions.Change { return &sessions.Change{DropLast: 3} }},
		{"append after drop last", func() *sessions.Change { return &sessions.Change{Append: users("u", 2)} }},
		{"drop last again", func() *sessions.Change { return &sessions.Change{DropLast: 1} }},
		{"empty change", func() *sessions.Change { return &sessions.Change{} }},
		{"drop all", func() *sessions.Change { return &sessions.Change{DropFirst: 4} }},
		{"append to empty", func() *sessions.Change { return &sessions.Change{Append: users("c", 1)} }},
	}
	for i, step := range steps {
		before := want.Version
		h.write(want, step.ch())
		if want.Version != before+1 {
			h.t.Fatalf("step %d (%s): version %d, want %d", i, step.name, want.Version, before+1)
		}
	}
}

// testWriteCombined writes changes with several parts, applied in the
// documented order.
func testWriteCombined(h *harness) {
	want := h.create(newRecord("s", at(0)))
	summary := "compacted"
	h.write(want, &sessions.Change{Append: users("a", 5), Events: stamp(want, at(1), richEvents()...),
		AddTurns: 1, UpdatedAt: at(1)})
	h.write(want, &sessions.Change{DropFirst: 3, Append: users("b", 2), Status: sessions.StatusCancelled,
		MaxTurns: 3, UpdatedAt: at(2)})
	h.write(want, &sessions.Change{Replace: true, ReplaceWith: users("sum", 1), Append: users("c", 2),
		SetSummary: true, Summary: &summary, Events: stamp(want, at(3), sessions.Event{Type: sessions.EventContextCompacted}),
		AddTurns: 2, UpdatedAt: at(3)})
	// DropFirst is ignored when Replace is set.
	h.write(want, &sessions.Change{Replace: true, ReplaceWith: users("r", 2), DropFirst: 1})
	h.write(want, &sessions.Change{DropFirst: 1, Append: users("d", 1)})
}

func testWriteConflict(h *harness) {
	want := h.create(newRecord("s", at(0)))
	h.write(want, &sessions.Change{Append: users("a", 2)})
	h.write(want, &sessions.Change{Append: users("b", 1)})
	summary := "x"
	stale := func() *sessions.Change {
		return &sessions.Change{Append: users("stale", 1), DropFirst: 1, Events: stamp(want, at(9), sessions.Event{Type: "x"}),
			SetSummary: true, Summary: &summary, Status: sessions.StatusError, AddTurns: 1, MaxTurns: 5, UpdatedAt: at(9)}
	}
	for _, base := range []int64{0, want.Version - 1, want.Version + 1, -1} {
		err := h.b.Write(h.ctx(), "s", base, stale())
		h.wantErr(fmt.Sprintf("Write at base %d (stored %d)", base, want.Version), err, sessions.ErrConflict, "s")
		h.check(want)
	}
	err := h.b.Write(h.ctx(), "s", 0, &sessions.Change{Replace: true, ReplaceWith: users("x", 1)})
	h.wantErr("stale Replace", err, sessions.ErrConflict, "s")
	h.check(want)
}

// testWriteImpossible checks that a change the session cannot take fails
// without writing anything.
func testWriteImpossible(h *harness) {
	want := h.create(newRecord("s", at(0)))
	h.write(want, &sessions.Change{Append: users("a", 3)})
	for _, drop := range []int{4, 100, -1} {
		err := h.b.Write(h.ctx(), "s", want.Version, &sessions.Change{DropFirst: drop, Append: users("x", 1), AddTurns: 1})
		if err == nil {
			h.t.Fatalf("Write with DropFirst %d of 3 messages: no error", drop)
		}
		h.check(want)
	}
}

// testLoadReturnsCopies checks that changing a loaded record changes
// nothing stored.
func testLoadReturnsCopies(h *harness) {
	summary := "s"
	rec := newRecord("p", at(0))
	rec.Summary = &summary
	rec.Messages = users("m", 3)
	rec.Events = stamp(rec, at(0), richEvents()...)
	want := h.create(rec)
	child := h.fork(want, "c", 2, at(1))
	for _, load := range []func() (*sessions.Record, error){
		func() (*sessions.Record, error) { return h.b.Load(h.ctx(), "p") },
		func() (*sessions.Record, error) { return h.b.LoadMeta(h.ctx(), "p") },
	} {
		got, err := load()
		if err != nil {
			h.t.Fatal(err)
		}
		got.Metadata["owner"] = "changed"
		got.Metadata["new"] = int64(1)
		*got.Summary = "changed"
		got.ChildIDs[0] = "changed"
		if len(got.Messages) > 0 {
			got.Messages[0] = user("changed")
			got.Events[0].Type = "changed"
		}
		h.check(want)
	}
	h.check(child)
}

// testRoundTrip checks messages and events through both write paths
// (Create and Write) in the canonical form.
func testRoundTrip(h *harness) {
	rec := newRecord("s", at(0))
	rec.Messages = richMessages()
	rec.Events = stamp(rec, at(0), richEvents()...)
	want := h.create(rec)
	h.write(want, &sessions.Change{Append: richMessages(), Events: stamp(want, at(1).Add(7), richEvents()...)})
	h.write(want, &sessions.Change{Replace: true, ReplaceWith: richMessages()[:5]})

	got, err := h.b.Load(h.ctx(), "s")
	if err != nil {
		h.t.Fatal(err)
	}
	args := got.Messages[2].ToolCalls[0].Arguments
	if _, ok := args["limit"].(int64); !ok {
		h.t.Errorf("tool argument limit: got %T, want int64", args["limit"])
	}
	if _, ok := args["exact"].(float64); !ok {
		h.t.Errorf("tool argument exact: got %T, want float64", args["exact"])
	}
	for _, e := range got.Events {
		if e.SessionID != "s" {
			h.t.Errorf("event %d: SessionID %q, want %q", e.Seq, e.SessionID, "s")
		}
	}
}
