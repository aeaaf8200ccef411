package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// walFrames returns the frames written to be's WAL since the last call
// (PRAGMA wal_checkpoint's "log" column), and empties the WAL.
func walFrames(t *testing.T, be *Backend) int {
	t.Helper()
	var frames int
	for _, mode := range []string{"PASSIVE", "TRUNCATE"} {
		var busy, log, done int
		if err := be.db.QueryRow("PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
			t.Fatal(err)
		}
		if busy != 0 {
			t.Fatalf("wal_checkpoint(%s): busy", mode)
		}
		if mode == "PASSIVE" {
			frames = log
		}
	}
	return frames
}

// TestWritePages counts the pages an append of one message writes: the
// leaf of table writes its row goes into, and nothing else (the sessions
// row keeps its fields). A status change (rare) also rewrites the
// sessions row and the entries of the indexes on the status, on the
// repository and status, and on the base.
func TestWritePages(t *testing.T) {
	be := openClosed(t, filepath.Join(t.TempDir(), "sessions.db"))
	ctx := t.Context()
	now := time.Now()
	if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	walFrames(t, be)
	const n = 20
	for i := range n {
		m := message.Message{Role: message.RoleUser, Text: "a short note"}
		ch := &sessions.Change{Append: []message.Message{m}, UpdatedAt: now,
			Events: []sessions.Event{{Seq: int64(i + 1), Type: sessions.EventMessage, Time: now, Data: map[string]any{"index": int64(i), "role": m.Role}}}}
		if err := be.Write(ctx, "s", int64(i), ch); err != nil {
			t.Fatal(err)
		}
	}
	if got := walFrames(t, be); got != n {
		t.Errorf("%d appends wrote %d pages, want %d (1 each)", n, got, n)
	}
	ch := &sessions.Change{Status: sessions.StatusCompleted, UpdatedAt: now,
		Events: []sessions.Event{{Seq: n + 1, Type: sessions.EventStatus, Time: now, Data: map[string]any{"status": "completed"}}}}
	if err := be.Write(ctx, "s", n, ch); err != nil {
		t.Fatal(err)
	}
	if got := walFrames(t, be); got != 5 {
		t.Errorf("a status change wrote %d pages, want 5", got)
	}
	rec, err := be.LoadMeta(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != sessions.StatusCompleted || rec.Version != n+1 {
		t.Errorf("status %s, version %d; want completed, %d", rec.Status, rec.Version, n+1)
	}

	// Rows of about 1 KB: seven fit a page, and a full last page is split
	// by starting a new one (a page and its parent written), not by
	// rebalancing its neighbours as an index b-tree (a WITHOUT ROWID
	// table) would, which wrote 2.35 pages a write.
	if err := be.Create(ctx, &sessions.Record{ID: "kb", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	walFrames(t, be)
	const kb = 200
	for i := range kb {
		m := message.Message{Role: message.RoleUser, Text: strings.Repeat("x", 1000)}
		if err := be.Write(ctx, "kb", int64(i), &sessions.Change{Append: []message.Message{m}, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if got := float64(walFrames(t, be)) / kb; got > 1.5 {
		t.Errorf("appends of 1 KB wrote %.2f pages each, want at most 1.5", got)
	}
}

// TestWriteAfterAnotherWriter checks that a write does not trust the
// state its Backend's previous write left when another Backend has
// written the session since: here it deleted the session and made a new
// one of the same id and version, with more messages.
func TestWriteAfterAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	a, b := openClosed(t, path), openClosed(t, path)
	ctx := t.Context()
	now := time.Now()
	user := func(text string) message.Message { return message.Message{Role: message.RoleUser, Text: text} }
	create := func(be *Backend, texts ...string) {
		t.Helper()
		if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		ch := &sessions.Change{UpdatedAt: now}
		for _, text := range texts {
			ch.Append = append(ch.Append, user(text))
		}
		if err := be.Write(ctx, "s", 0, ch); err != nil {
			t.Fatal(err)
		}
	}
	create(a, "a1", "a2")
	if err := b.Delete(ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	create(b, "b1", "b2", "b3")
	if err := a.Write(ctx, "s", 1, &sessions.Change{Append: []message.Message{user("a3")}, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	wantTexts(t, a, "s", "b1 b2 b3 a3", 2)
	// And a write at a version another Backend has moved past conflicts.
	if err := b.Write(ctx, "s", 2, &sessions.Change{Append: []message.Message{user("b4")}, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx, "s", 2, &sessions.Change{Append: []message.Message{user("a4")}, UpdatedAt: now}); !errors.Is(err, sessions.ErrConflict) {
		t.Errorf("write at a stale version: %v, want a conflict", err)
	}
}

// wantTexts checks that session id, loaded from be, has the messages
// whose texts want lists (space-separated) at version.
func wantTexts(t *testing.T, be *Backend, id, want string, version int64) {
	t.Helper()
	rec, err := be.Load(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range rec.Messages {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, " "); got != want || rec.Version != version {
		t.Errorf("messages %q, version %d; want %q, %d", got, rec.Version, want, version)
	}
}
