// Package rowstoretest tests what the SQL session backends share beyond
// the sessions.Backend contract: the row layout of package rowstore. A
// backend's tests call Run with a way to reach its tables directly.
package rowstoretest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
)

// Raw reaches a backend's tables without the backend, as another tool
// would.
type Raw interface {
	// Table returns the name of the table of kind "sessions" or "views".
	Table(kind string) string
	// Exec runs a statement.
	Exec(query string) error
	// Count returns how many rows of kind "sessions", "views",
	// "messages" or "events" are stored, in all sessions (a backend that
	// packs several messages or events into one row of its own counts
	// those).
	Count(kind string) (int, error)
	// Damage replaces the stored body of the message at position pos of
	// session id's own rows with body, leaving its checksum as it was.
	Damage(id string, pos int64, body string) error
}

// Run runs the row layout tests. open returns a new, empty backend and
// its Raw view; Run closes the backend when the test ends.
//
//   - StorageSharing: forks, trims and deletes write no message rows, a
//     reset writes only its replacement, and frozen views go when nothing
//     uses them.
//   - DeleteKeepsForkRows: the database's foreign keys refuse a delete of
//     a row that a fork's view uses.
//   - LoadLong: a load decoded by several workers puts every message and
//     event in place, and a damaged row fails it naming the message.
//   - BatchReleasesViews: a view frozen and dropped within one Write goes.
func Run(t *testing.T, open func(t *testing.T) (sessions.Backend, Raw)) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, b sessions.Backend, raw Raw)
	}{
		{"StorageSharing", testStorageSharing},
		{"DeleteKeepsForkRows", testDeleteKeepsForkRows},
		{"LoadLong", testLoadLong},
		{"BatchReleasesViews", testBatchReleasesViews},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, raw := open(t)
			t.Cleanup(func() { b.Close() })
			tc.run(t, b, raw)
		})
	}
}

// counts returns the number of rows in each table.
func counts(t testing.TB, raw Raw) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, kind := range []string{"sessions", "views", "messages", "events"} {
		n, err := raw.Count(kind)
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = n
	}
	return out
}

// testStorageSharing checks the row counts behind the fork-sharing design:
// forks, trims and deletes write no message rows, a reset writes only its
// replacement, and frozen views go when nothing uses them.
func testStorageSharing(t *testing.T, b sessions.Backend, raw Raw) {
	ctx := t.Context()
	msgs := make([]message.Message, 1000)
	for i := range msgs {
		msgs[i] = message.Message{Role: message.RoleUser, Text: fmt.Sprint(i)}
	}
	now := time.Now()
	if err := b.Create(ctx, &sessions.Record{ID: "p", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	version := int64(0)
	fork := func(src, dst string, keep int) {
		t.Helper()
		spec := &sessions.ForkSpec{Src: src, SrcVersion: version, KeepFirst: keep, SrcTime: now,
			SrcEvent: sessions.Event{Seq: version + 1, Type: sessions.EventFork, Time: now},
			Dst:      sessions.Record{ID: dst, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, ParentID: src}}
		if err := b.Fork(ctx, spec); err != nil {
			t.Fatal(err)
		}
		version++
	}
	write := func(id string, base int64, ch *sessions.Change) {
		t.Helper()
		if err := b.Write(ctx, id, base, ch); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"sessions": 1, "views": 0, "messages": 1000, "events": 0}
	check := func(step string) {
		t.Helper()
		if got := counts(t, raw); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: rows %v, want %v", step, got, want)
		}
	}
	check("create")
	fork("p", "c1", 1000)
	want["sessions"], want["views"], want["events"] = 2, 1, 1
	check("fork of 1000 messages")
	fork("p", "c2", 10)
	want["sessions"], want["views"], want["events"] = 3, 2, 2
	check("second fork")

	write("p", version, &sessions.Change{DropFirst: 500})
	check("trim")
	write("p", version+1, &sessions.Change{Replace: true, ReplaceWith: msgs[:3]})
	want["messages"] += 3
	check("reset")

	// c1's view rests on p's frozen view; a grandchild inside c1's shared
	// part shares that directly.
	spec := &sessions.ForkSpec{Src: "c1", SrcVersion: 0, KeepFirst: 7, SrcTime: now,
		SrcEvent: sessions.Event{Seq: 1, Type: sessions.EventFork, Time: now},
		Dst:      sessions.Record{ID: "g", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, ParentID: "c1"}}
	if err := b.Fork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["events"] = 4, 3
	check("fork inside the shared part")

	if err := b.Delete(ctx, "c2", false); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["views"] = 3, 1
	check("delete of a fork frees its frozen view")
	write("c1", 1, &sessions.Change{DropFirst: 1000})
	check("c1 trimmed past its base, which g still uses")
	if err := b.Delete(ctx, "g", false); err != nil {
		t.Fatal(err)
	}
	want["sessions"], want["views"] = 2, 0
	check("last user of a frozen view gone")
}

// testDeleteKeepsForkRows checks the database's own guard: even a delete
// this package did not make cannot remove the rows a fork's view uses.
func testDeleteKeepsForkRows(t *testing.T, b sessions.Backend, raw Raw) {
	ctx := context.Background()
	now := time.Now()
	rec := &sessions.Record{ID: "p", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
		Messages: []message.Message{{Role: message.RoleUser, Text: "shared"}}}
	if err := b.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	spec := &sessions.ForkSpec{Src: "p", KeepFirst: 1, SrcEvent: sessions.Event{Seq: 1, Type: sessions.EventFork, Time: now},
		Dst: sessions.Record{ID: "c", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}}
	if err := b.Fork(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := raw.Exec("DELETE FROM " + raw.Table("sessions") + " WHERE id = 'p'"); err == nil || !strings.Contains(strings.ToLower(err.Error()), "foreign key") {
		t.Fatalf("deleting a forked session's row directly: %v, want a foreign key error", err)
	}
	got, err := b.Load(ctx, "c")
	if err != nil || len(got.Messages) != 1 || got.Messages[0].Text != "shared" || got.ParentID != "p" {
		t.Fatalf("fork after the refused delete: %+v, %v", got, err)
	}
}

// testLoadLong loads sessions long enough for several decoding workers
// and checks that every message and event comes back in place, and that a
// damaged row fails the load.
func testLoadLong(t *testing.T, b sessions.Backend, raw Raw) {
	ctx := t.Context()
	const n = 5*rowstore.DecodeBatch + 17
	now := time.Now().UTC()
	rec := &sessions.Record{ID: "long", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}
	for i := range n {
		rec.Messages = append(rec.Messages, message.Message{Role: message.RoleUser, Text: fmt.Sprint("m", i),
			Metadata: map[string]any{"i": int64(i), "f": float64(i)}})
		e := sessions.Event{Seq: int64(i + 1), Type: "e", SessionID: "long", Time: now.Add(time.Duration(i))}
		if i%3 != 0 {
			e.Data = map[string]any{"i": int64(i)}
		}
		rec.Events = append(rec.Events, e)
	}
	if err := b.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != n || len(got.Events) != n {
		t.Fatalf("%d messages and %d events, want %d each", len(got.Messages), len(got.Events), n)
	}
	for i := range n {
		if m := got.Messages[i]; m.Text != rec.Messages[i].Text || m.Metadata["i"] != int64(i) || m.Metadata["f"] != float64(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
		if e := got.Events[i]; e.Seq != int64(i+1) || !e.Time.Equal(rec.Events[i].Time) || (e.Data == nil) != (i%3 == 0) ||
			(e.Data != nil && e.Data["i"] != int64(i)) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}

	if err := raw.Damage("long", 4000, `{"role": 7}`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, "long"); err == nil || !strings.Contains(err.Error(), "message 4000") {
		t.Fatalf("Load with a damaged message row: %v, want an error naming message 4000", err)
	}
}

// testBatchReleasesViews checks that a view frozen by a rewind (DropLast)
// that a later change of the same Write resets away is deleted with the
// write, as it would be by two Writes.
func testBatchReleasesViews(t *testing.T, b sessions.Backend, raw Raw) {
	ctx := t.Context()
	now := time.Now()
	if err := b.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	msgs := []message.Message{{Role: message.RoleUser, Text: "a"}, {Role: message.RoleUser, Text: "b"}, {Role: message.RoleUser, Text: "c"}}
	if err := b.Write(ctx, "s", 0, &sessions.Change{Append: msgs}, &sessions.Change{DropLast: 1}); err != nil {
		t.Fatal(err)
	}
	if n := counts(t, raw)["views"]; n != 1 {
		t.Fatalf("after a rewind: %d views, want 1", n)
	}
	if err := b.Write(ctx, "s", 2, &sessions.Change{DropLast: 1}, &sessions.Change{Replace: true, ReplaceWith: msgs[:1]}); err != nil {
		t.Fatal(err)
	}
	if n := counts(t, raw)["views"]; n != 0 {
		t.Fatalf("after a rewind and a reset in one write: %d views, want 0", n)
	}
}
