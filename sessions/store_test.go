package sessions

import (
	"context"
	"errors"
	"fmt"
	"github.com/skein-dev/skein/sessions/message"
	"strings"
	"sync"
	"testing"
	"time"
)

var ctx = context.Background()

func newTestStore(t *testing.T, b Backend, capacity int) *Store {
	t.Helper()
	s, err := NewStore(b, WithCap(capacity), WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustOpen(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, err := s.Open(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t *testing.T, s *Store, id string, ms ...message.Message) {
	t.Helper()
	if _, err := s.Apply(ctx, id, &Change{Append: ms}); err != nil {
		t.Fatal(err)
	}
}

func liveIDs(s *Store) []string {
	var ids []string
	for _, l := range s.Live() {
		ids = append(ids, l.ID)
	}
	return ids
}

func TestStoreEvictionOrder(t *testing.T) {
	s := newTestStore(t, NewMemoryBackend(), 3)
	for _, id := range []string{"a", "b", "c"} {
		mustOpen(t, s, id)
	}
	mustAppend(t, s, "a", message.Message{Role: message.RoleUser, Text: "x"}) // a is newest
	if _, err := s.Length(ctx, "b"); err != nil {                             // reads do not refresh
		t.Fatal(err)
	}
	mustOpen(t, s, "d")
	if got := fmt.Sprint(liveIDs(s)); got != "[d a c]" {
		t.Fatalf("live = %s, want [d a c] (most recent first)", got)
	}
	if _, err := s.Length(ctx, "b"); !errors.Is(err, ErrNotFound) || err.Error() != "unknown session id 'b'" {
		t.Fatalf("evicted session: err = %v", err)
	}
}

func TestStoreForkIsolation(t *testing.T) {
	s := newTestStore(t, NewMemoryBackend(), 10)
	mustOpen(t, s, "p")
	mustAppend(t, s, "p", message.Message{Role: message.RoleUser, Text: "0"}, message.Message{Role: message.RoleAssistant, Text: "1"})
	if _, err := s.Fork(ctx, "p", "c", ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "p", message.Message{Role: message.RoleUser, Text: "p2"})
	mustAppend(t, s, "c", message.Message{Role: message.RoleUser, Text: "c2"})
	if _, err := s.Update(ctx, "p", func(v message.View) (*Change, error) { return &Change{DropFirst: 1}, nil }); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Snapshot(ctx, "p")
	c, _ := s.Snapshot(ctx, "c")
	if got := fmt.Sprint(textsOf(p.Messages)); got != "[1 p2]" {
		t.Errorf("parent = %s", got)
	}
	if got := fmt.Sprint(textsOf(c.Messages)); got != "[0 1 c2]" {
		t.Errorf("child = %s", got)
	}
	if c.ParentID != "p" || fmt.Sprint(p.ChildIDs) != "[c]" {
		t.Errorf("lineage: parent %q children %v", c.ParentID, p.ChildIDs)
	}
}

func TestStoreApplyIsAtomic(t *testing.T) {
	s := newTestStore(t, NewMemoryBackend(), 10)
	mustOpen(t, s, "a")
	_, err := s.Apply(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "ok"}, {Role: message.RoleTool, ToolCallID: "x"}}})
	if err == nil {
		t.Fatal("invalid append accepted")
	}
	if n, _ := s.Length(ctx, "a"); n != 0 {
		t.Fatalf("a failed change left %d messages", n)
	}
	rec, _ := s.Snapshot(ctx, "a")
	if len(rec.Events) != 1 || rec.Events[0].Type != EventSessionStarted || rec.Version != 0 {
		t.Fatalf("a failed change left events %v version %d", rec.Events, rec.Version)
	}
}

// durableMemory is a memory backend that claims durability, to test the
// store's reload path without a database.
type durableMemory struct{ *MemoryBackend }

func (durableMemory) Durable() bool { return true }

func TestStoreReloadsAndHealsDurableSessions(t *testing.T) {
	b := durableMemory{NewMemoryBackend()}
	s := newTestStore(t, b, 1)
	mustOpen(t, s, "a")
	mustAppend(t, s, "a", message.Message{Role: message.RoleUser, Text: "q"},
		message.Message{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "slow", Arguments: map[string]any{}}}})
	mustOpen(t, s, "b") // evicts a; it stays stored
	if got := fmt.Sprint(liveIDs(s)); got != "[b]" {
		t.Fatalf("live = %s", got)
	}
	if ok, _ := s.Exists(ctx, "a"); !ok {
		t.Fatal("evicted durable session is gone")
	}
	// a read does not load it into the LRU
	if n, _ := s.Length(ctx, "a"); n != 2 {
		t.Fatalf("length of stored session = %d", n)
	}
	// a write reloads it, healing the open tool call first
	mustAppend(t, s, "a", message.Message{Role: message.RoleUser, Text: "again"})
	rec, _ := s.Snapshot(ctx, "a")
	if len(rec.Messages) != 4 || rec.Messages[2].Role != message.RoleTool || !rec.Messages[2].IsError || rec.Messages[2].Text != "interrupted" {
		t.Fatalf("not healed: %+v", rec.Messages)
	}
	if err := message.Validate(rec.Messages); err != nil {
		t.Fatal(err)
	}
	var healed bool
	for _, e := range rec.Events {
		healed = healed || e.Type == EventHealed
	}
	if !healed {
		t.Fatal("no healed event")
	}
	// close marks it completed and keeps it; open resumes it
	if err := s.Close(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	stored, _ := b.Load(ctx, "a")
	if stored.Status != StatusCompleted {
		t.Fatalf("status after close = %s", stored.Status)
	}
	mustOpen(t, s, "a")
	rec, _ = s.Snapshot(ctx, "a")
	if rec.Status != StatusActive || len(rec.Messages) != 4 {
		t.Fatalf("reopened: status %s, %d messages", rec.Status, len(rec.Messages))
	}
}

func TestStoreConflictLeavesNothingHalfWritten(t *testing.T) {
	b := durableMemory{NewMemoryBackend()}
	s1 := newTestStore(t, b, 4)
	s2 := newTestStore(t, b, 4)
	mustOpen(t, s1, "a")
	mustOpen(t, s2, "a")
	mustAppend(t, s1, "a", message.Message{Role: message.RoleUser, Text: "from s1"})
	_, err := s2.Apply(ctx, "a", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "from s2"}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want conflict", err)
	}
	if want := "session 'a' was modified by another process"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v", err)
	}
	rec, _ := b.Load(ctx, "a")
	if len(rec.Messages) != 1 || rec.Messages[0].Text != "from s1" {
		t.Fatalf("stored = %+v", rec.Messages)
	}
	// the loser's stale copy was dropped: reopening reloads it and works
	mustOpen(t, s2, "a")
	mustAppend(t, s2, "a", message.Message{Role: message.RoleUser, Text: "from s2, after reopening"})
	if n, _ := s2.Length(ctx, "a"); n != 2 {
		t.Fatalf("length after reopen = %d", n)
	}
}

func TestStoreConcurrentUse(t *testing.T) {
	s := newTestStore(t, NewMemoryBackend(), 64)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			id := fmt.Sprintf("s%d", g%4) // two goroutines per session
			if _, err := s.Open(ctx, id, 0); err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < 200; i++ {
				if _, err := s.Apply(ctx, id, &Change{Append: []message.Message{{Role: message.RoleUser, Text: "m"}}}); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					if _, err := s.Fork(ctx, id, fmt.Sprintf("%s-f%d-%d", id, g, i), ForkOptions{KeepFirst: -1}); err != nil {
						t.Error(err)
					}
				}
				_, _ = s.Snapshot(ctx, id)
				_ = s.Live()
			}
		}(g)
	}
	wg.Wait()
	for g := 0; g < 4; g++ {
		id := fmt.Sprintf("s%d", g)
		if n, err := s.Length(ctx, id); err == nil && n != 400 {
			t.Errorf("%s has %d messages, want 400", id, n)
		}
	}
}

func TestStoreForkConflictDropsStaleSource(t *testing.T) {
	b := durableMemory{NewMemoryBackend()}
	s1 := newTestStore(t, b, 4)
	s2 := newTestStore(t, b, 4)
	mustOpen(t, s1, "a")
	mustOpen(t, s2, "a")
	mustAppend(t, s1, "a", message.Message{Role: message.RoleUser, Text: "from s1"})
	_, err := s2.Fork(ctx, "a", "b", ForkOptions{KeepFirst: -1})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "session 'a' was modified by another process") {
		t.Fatalf("fork of a stale copy: %v", err)
	}
	if ok, _ := b.Exists(ctx, "b"); ok {
		t.Fatal("the failed fork stored its child")
	}
	// the stale source was dropped: the next fork reloads it and works
	if _, err := s2.Fork(ctx, "a", "b", ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s2.Length(ctx, "b"); n != 1 {
		t.Fatalf("fork after reloading has %d messages, want 1", n)
	}
}

// TestOpenReports: Open says whether it created the session and gives
// the turns and cap a loop needs, so the loop reads nothing else before
// it starts (sessionstest's OpenReopened checks a session reloaded from
// a durable backend).
func TestOpenReports(t *testing.T) {
	b := NewMemoryBackend()
	s := newTestStore(t, b, 8)
	o, err := s.Open(ctx, "a", 4)
	if err != nil || o != (Opened{Created: true, MaxTurns: 4}) {
		t.Fatalf("first open = %+v, %v", o, err)
	}
	if _, err := s.Apply(ctx, "a", &Change{AddTurns: 3, Status: StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if o, err = s.Open(ctx, "a", 0); err != nil || o != (Opened{Turns: 3, MaxTurns: 4}) {
		t.Fatalf("resume = %+v, %v", o, err)
	}
}

// conflictingBackend is a memory backend that says it is durable and
// refuses its next write with ErrConflict when conflict is set, as a
// durable backend does when another process wrote the session since it
// was loaded.
type conflictingBackend struct {
	*MemoryBackend
	conflict bool
}

func (b *conflictingBackend) Durable() bool { return true }

func (b *conflictingBackend) Write(ctx context.Context, id string, base int64, changes ...*Change) error {
	if b.conflict {
		b.conflict = false
		return ErrConflict
	}
	return b.MemoryBackend.Write(ctx, id, base, changes...)
}

// TestLoadHealConflict: the heal that loading a session runs (it left
// tool calls open) meets a write of another process: the use fails with
// the conflict, and the store neither hangs nor keeps the stale copy.
func TestLoadHealConflict(t *testing.T) {
	b := &conflictingBackend{MemoryBackend: NewMemoryBackend()}
	now := time.Unix(1700000000, 0)
	open := []message.Message{{Role: message.RoleUser, Text: "go"}, {Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "work", Arguments: map[string]any{}}}}}
	if err := b.Create(ctx, &Record{ID: "s", Status: StatusActive, CreatedAt: now, UpdatedAt: now, Messages: open}); err != nil {
		t.Fatal(err)
	}
	s := newTestStore(t, b, 4)
	b.conflict = true
	done := make(chan error, 1)
	go func() { _, err := s.Messages(ctx, "s"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("load with a conflicting heal: %v, want ErrConflict", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the store hangs when the heal of a loaded session conflicts")
	}
	msgs, err := s.Messages(ctx, "s")
	if err != nil || len(msgs) != 3 || msgs[2].Role != message.RoleTool {
		t.Fatalf("the next use: %d messages, %v (want the open call healed)", len(msgs), err)
	}
}

// laggingBackend is a durable memory backend whose LoadMeta answers
// with the version before the last write, as a read that began before
// this process's own commit does.
type laggingBackend struct{ *MemoryBackend }

func (b laggingBackend) Durable() bool { return true }

func (b laggingBackend) LoadMeta(ctx context.Context, id string) (*Record, error) {
	rec, err := b.MemoryBackend.LoadMeta(ctx, id)
	if err == nil {
		rec.Version--
	}
	return rec, err
}

// TestRefreshKeepsNewerCopy: Refresh drops a live copy only when the
// backend holds a newer version; a read that lags this store's own
// writes (one that began before a commit) leaves the copy alone, so a
// turn that is writing the session keeps it.
func TestRefreshKeepsNewerCopy(t *testing.T) {
	b := laggingBackend{NewMemoryBackend()}
	s := newTestStore(t, b, 4)
	if err := s.Create(ctx, "s", Info{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, "s", &Change{Append: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	live, _ := s.lru.Peek("s")
	if err := s.Refresh(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if cur, ok := s.lru.Peek("s"); !ok || cur != live {
		t.Fatal("Refresh dropped a live copy newer than the backend's answer")
	}
}

func textsOf(ms []message.Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].Text
	}
	return out
}

// TestSessionStarted: every session the store creates (Open, Create,
// Fork) logs session:started as its first event, with the data given,
// to its log and its observers; resuming or reloading it does not.
func TestSessionStarted(t *testing.T) {
	b := &countingBackend{MemoryBackend: NewMemoryBackend(), durable: true}
	s := newTestStore(t, b, 1)
	var observed []string
	s.Observe(func(e Event) { observed = append(observed, e.SessionID+" "+e.Type) })
	if _, err := s.OpenWith(ctx, "a", OpenOptions{Info: Info{Started: Started{"agent": "helper"}}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "a", message.Message{Role: message.RoleUser, Text: "hi"})
	if err := s.Create(ctx, "b", Info{}); err != nil { // evicts a (cap 1)
		t.Fatal(err)
	}
	// a again: loaded from the backend and resumed, not started
	if _, err := s.OpenWith(ctx, "a", OpenOptions{Info: Info{Started: Started{"agent": "other"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fork(ctx, "a", "c", ForkOptions{KeepFirst: -1, Started: Started{"agent": "helper"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": "[session:started map[agent:helper] message map[index:0 role:user] fork map[child_id:c kept:1]]",
		"b": "[session:started map[]]",
		"c": "[session:started map[agent:helper parent_id:a] fork map[kept:1 parent_id:a]]",
	}
	for id, w := range want {
		rec, err := b.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []any
		for _, e := range rec.Events {
			got = append(got, e.Type, e.Data)
		}
		if fmt.Sprint(got) != w {
			t.Errorf("%s's log: %v, want %s", id, got, w)
		}
		if rec.Events[0].Seq != 1 {
			t.Errorf("%s's session:started has seq %d", id, rec.Events[0].Seq)
		}
	}
	if got := fmt.Sprint(observed); got != "[a session:started a message b session:started a fork c session:started c fork]" {
		t.Errorf("observed %s", got)
	}
}
