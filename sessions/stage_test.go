package sessions

import (
	"context"
	"errors"
	"github.com/skein-dev/skein/sessions/message"
	"testing"
)

// countingBackend is a memory backend that counts writes and can pretend
// to be durable (the store then keeps evicted sessions in it and reloads
// them) and fail its writes.
type countingBackend struct {
	*MemoryBackend
	durable bool
	writes  int // Write calls
	changes int // changes they carried
	fail    error
}

func (b *countingBackend) Durable() bool { return b.durable }

func (b *countingBackend) Write(ctx context.Context, id string, base int64, changes ...*Change) error {
	if b.fail != nil {
		return b.fail
	}
	b.writes++
	b.changes += len(changes)
	return b.MemoryBackend.Write(ctx, id, base, changes...)
}

func (b *countingBackend) stored(t *testing.T, id string) *Record {
	t.Helper()
	rec, err := b.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestStageCommit checks group commit: staged changes are visible in the
// store at once, reach the backend in one Write on Commit, and go along
// with the session's next direct write.
func TestStageCommit(t *testing.T) {
	b := &countingBackend{MemoryBackend: NewMemoryBackend(), durable: true}
	s := newTestStore(t, b, 4)
	mustOpen(t, s, "a")
	var seqs []int64
	for _, text := range []string{"one", "two"} {
		events, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, events[0].Seq)
	}
	if seqs[0] != 2 || seqs[1] != 3 { // 1 is session:started
		t.Fatalf("staged event seqs %v, want [2 3]", seqs)
	}
	if n, _ := s.Length(ctx, "a"); n != 2 {
		t.Fatalf("Length after staging 2 messages = %d", n)
	}
	if rec := b.stored(t, "a"); len(rec.Messages) != 0 || b.writes != 0 {
		t.Fatalf("staging wrote to the backend: %d messages, %d writes", len(rec.Messages), b.writes)
	}
	snap, err := s.Snapshot(ctx, "a")
	if err != nil || len(snap.Events) != 3 || len(snap.Messages) != 2 {
		t.Fatalf("Snapshot of staged changes: %d messages, %d events, %v", len(snap.Messages), len(snap.Events), err)
	}
	if err := s.Commit(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if rec := b.stored(t, "a"); len(rec.Messages) != 2 || len(rec.Events) != 3 || rec.Version != 2 || b.writes != 1 || b.changes != 2 {
		t.Fatalf("after Commit: %d messages, %d events, version %d, %d writes of %d changes; want 2, 3, 2, 1, 2",
			len(rec.Messages), len(rec.Events), rec.Version, b.writes, b.changes)
	}
	if err := s.Commit(ctx, "a"); err != nil || b.writes != 1 {
		t.Fatalf("Commit with nothing staged: %v, %d writes", err, b.writes)
	}

	// A direct write carries the staged changes with it, in one Write.
	if _, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "three"}}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "a", message.Message{Role: message.RoleUser, Text: "four"})
	if rec := b.stored(t, "a"); len(rec.Messages) != 4 || rec.Version != 4 || b.writes != 2 {
		t.Fatalf("after Apply: %d messages, version %d, %d writes; want 4, 4, 2", len(rec.Messages), rec.Version, b.writes)
	}

	// So does a fork of the session, before the backend forks it.
	if _, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "five"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, "a", "f", ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	if rec := b.stored(t, "f"); len(rec.Messages) != 5 {
		t.Fatalf("the fork of a session with a staged message has %d messages, want 5", len(rec.Messages))
	}
}

// TestStageSurvivesEviction checks that a session leaving the LRU writes
// its staged changes, and that Shutdown writes every session's.
func TestStageSurvivesEviction(t *testing.T) {
	b := &countingBackend{MemoryBackend: NewMemoryBackend(), durable: true}
	s := newTestStore(t, b, 1)
	mustOpen(t, s, "a")
	if _, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, s, "b") // evicts a
	if rec := b.stored(t, "a"); len(rec.Messages) != 1 {
		t.Fatalf("evicted session: %d messages stored, want 1", len(rec.Messages))
	}
	if err := s.Commit(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stage(ctx, "b", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "bye"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if rec := b.stored(t, "b"); len(rec.Messages) != 1 {
		t.Fatalf("after Shutdown: %d messages stored, want 1", len(rec.Messages))
	}
}

// TestStageCommitFailure checks that a failed commit keeps the changes
// staged for the next write, and that a failure to write an evicted
// session's staged changes is reported by its next Commit.
func TestStageCommitFailure(t *testing.T) {
	b := &countingBackend{MemoryBackend: NewMemoryBackend(), durable: true}
	s := newTestStore(t, b, 1)
	mustOpen(t, s, "a")
	if _, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	disk := errors.New("disk full")
	b.fail = disk
	if err := s.Commit(ctx, "a"); !errors.Is(err, disk) {
		t.Fatalf("Commit on a failing backend: %v", err)
	}
	b.fail = nil
	if err := s.Commit(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if rec := b.stored(t, "a"); len(rec.Messages) != 1 {
		t.Fatalf("after a failed and a good Commit: %d messages stored, want 1", len(rec.Messages))
	}

	if _, err := s.Stage(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "lost"}}}); err != nil {
		t.Fatal(err)
	}
	b.fail = disk
	if _, err := s.Open(ctx, "b", 0); err != nil { // evicts a; its write fails
		t.Fatal(err)
	}
	b.fail = nil
	if err := s.Commit(ctx, "a"); !errors.Is(err, disk) {
		t.Fatalf("Commit after the evicted session's write failed: %v, want %v", err, disk)
	}
	if err := s.Commit(ctx, "a"); err != nil {
		t.Fatalf("the failure is reported once: %v", err)
	}
}
