package sqlite

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// walIndex returns the WAL's last frame (mxFrame) and how many of its
// frames are copied into the database (nBackfill), read from the
// wal-index file as SQLite maps it (the header's mxFrame at byte 16, the
// checkpoint info's nBackfill at byte 96), without checkpointing.
func walIndex(t *testing.T, path string) (frames, copied uint32) {
	t.Helper()
	shm, err := os.ReadFile(path + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	if len(shm) < 100 {
		t.Fatalf("wal-index of %d bytes", len(shm))
	}
	return binary.NativeEndian.Uint32(shm[16:]), binary.NativeEndian.Uint32(shm[96:])
}

// appendMessages appends n one-message changes to session "s" of be,
// whose version is *version.
func appendMessages(t *testing.T, be *Backend, version *int64, n int) {
	t.Helper()
	now := time.Now()
	for range n {
		m := message.Message{Role: message.RoleUser, Text: "a short note"}
		ch := &sessions.Change{Append: []message.Message{m}, UpdatedAt: now,
			Events: []sessions.Event{{Seq: *version + 1, Type: sessions.EventMessage, Time: now, Data: map[string]any{"index": *version, "role": m.Role}}}}
		if err := be.Write(t.Context(), "s", *version, ch); err != nil {
			t.Fatal(err)
		}
		*version++
	}
}

func newCheckpointed(t *testing.T) (*Backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessions.db")
	be := openClosed(t, path)
	now := time.Now()
	if err := be.Create(t.Context(), &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	var autocheckpoint int
	if err := be.db.QueryRow("PRAGMA wal_autocheckpoint").Scan(&autocheckpoint); err != nil || autocheckpoint != 0 {
		t.Fatalf("wal_autocheckpoint %d (%v), want 0: commits would checkpoint themselves", autocheckpoint, err)
	}
	return be, path
}

// TestCheckpointsOffTheWriter checks that commits do not checkpoint and
// that the Backend's goroutine does once about checkpointPages pages are
// written, while writes go on, and leaves the whole log copied so that
// the next write starts it over.
func TestCheckpointsOffTheWriter(t *testing.T) {
	be, path := newCheckpointed(t)
	var version int64
	// A page each by the Backend's estimate, under checkpointPages; about
	// 1.3 in fact, with the b-tree's splits.
	appendMessages(t, be, &version, 900)
	if frames, copied := walIndex(t, path); copied != 0 || frames < 900 {
		t.Fatalf("after 900 appends the log holds %d pages, %d copied; want 900 or more, none copied", frames, copied)
	}
	deadline := time.Now().Add(10 * time.Second)
	for be.ckpt.rounds.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint round 10 s after the log passed checkpointPages pages")
		}
		appendMessages(t, be, &version, 1)
	}
	// The round ended with the log copied whole, under the write lock:
	// the write that followed it, if any, started the log over.
	appendMessages(t, be, &version, 1)
	if frames, _ := walIndex(t, path); frames > 30 {
		t.Errorf("the writes after a checkpoint round left %d pages in the log: the log did not start over", frames)
	}
	rec, err := be.Load(t.Context(), "s")
	if err != nil || int64(len(rec.Messages)) != version {
		t.Fatalf("%v; want %d messages", err, version)
	}
}

// TestCheckpointBehind checks that when the goroutine does not run, a
// write that finds checkpointBehind pages waiting checkpoints itself, so
// the log stays bounded.
func TestCheckpointBehind(t *testing.T) {
	be, path := newCheckpointed(t)
	be.ckpt.once.Do(func() {}) // the goroutine never starts
	var version int64
	appendMessages(t, be, &version, 6000) // about 8,000 pages
	frames, _ := walIndex(t, path)
	if frames > checkpointBehind+10 {
		t.Errorf("the log holds %d pages after 6,000 appends without the goroutine, want at most %d", frames, checkpointBehind+10)
	}
	if be.ckpt.rounds.Load() != 0 {
		t.Errorf("%d rounds ran, want none", be.ckpt.rounds.Load())
	}
}
