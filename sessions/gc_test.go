package sessions

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestCollect(t *testing.T) {
	b := NewMemoryBackend()
	old, recent := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	create := func(id string, updated time.Time, status Status) {
		t.Helper()
		if err := b.Create(ctx, &Record{ID: id, Status: status, CreatedAt: old, UpdatedAt: updated}); err != nil {
			t.Fatal(err)
		}
	}
	fork := func(src, dst string, updated time.Time, status Status) {
		t.Helper()
		rec, err := b.LoadMeta(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		spec := &ForkSpec{Src: src, SrcVersion: rec.Version, SrcEvent: Event{Seq: int64(len(rec.ChildIDs) + 1), Type: EventFork},
			Dst: Record{ID: dst, Status: status, CreatedAt: old, UpdatedAt: updated, ParentID: src}}
		if err := b.Fork(ctx, spec); err != nil {
			t.Fatal(err)
		}
		// the fork event bumped the source's updated_at: put it back
		if err := b.Write(ctx, src, rec.Version+1, &Change{UpdatedAt: rec.UpdatedAt}); err != nil {
			t.Fatal(err)
		}
	}
	create("a", old, StatusCompleted)
	fork("a", "a-old", old, StatusCompleted)
	fork("a", "a-new", recent, StatusActive) // keeps a
	create("d", old, StatusError)
	create("e", old, StatusCompleted)
	fork("e", "e1", old, StatusCompleted)
	fork("e1", "e2", old, StatusCompleted)
	create("n", recent, StatusCompleted)
	filter := ListFilter{UpdatedBefore: recent, Limit: 1, Offset: 5}

	dry, err := Collect(ctx, b, filter, true)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "d"); !ok {
		t.Fatal("a dry run deleted d")
	}
	got, err := Collect(ctx, b, filter, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Collection{dry, got} {
		if fmt.Sprint(c.Kept) != "[a]" {
			t.Errorf("kept %v, want [a]", c.Kept)
		}
		deleted := slices.Clone(c.Deleted)
		slices.Sort(deleted)
		if fmt.Sprint(deleted) != "[a-old d e e1 e2]" {
			t.Errorf("deleted %v", c.Deleted)
		}
		if slices.Index(c.Deleted, "e2") > slices.Index(c.Deleted, "e1") || slices.Index(c.Deleted, "e1") > slices.Index(c.Deleted, "e") {
			t.Errorf("deleted %v: a fork must come before its source", c.Deleted)
		}
	}
	all, _, _ := b.List(ctx, ListFilter{})
	var left []string
	for _, s := range all {
		left = append(left, s.ID)
	}
	slices.Sort(left)
	if fmt.Sprint(left) != "[a a-new n]" {
		t.Errorf("left %v", left)
	}

	// A status filter.
	create("x", old, StatusError)
	create("y", old, StatusActive)
	got, err = Collect(ctx, b, ListFilter{UpdatedBefore: recent, Statuses: []Status{StatusError}}, false)
	if err != nil || fmt.Sprint(got.Deleted) != "[x]" || len(got.Kept) != 0 {
		t.Fatalf("status filter: %+v, %v", got, err)
	}
}
