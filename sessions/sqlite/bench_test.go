package sqlite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// typical returns message i of a typical agent transcript, repeating
// every four messages: a user prompt, an assistant message calling a
// tool, the tool's result and an assistant answer with usage (about 175
// bytes of JSON on average).
func typical(i int) message.Message {
	id := fmt.Sprintf("call_%d", i/4)
	switch i % 4 {
	case 0:
		return message.Message{Role: message.RoleUser, Text: fmt.Sprintf("Step %d: please look at the failing test in pkg/server and tell me why it fails.", i)}
	case 1:
		return message.Message{Role: message.RoleAssistant, Text: "Let me read the test output first.",
			ToolCalls: []message.ToolCall{{ID: id, Name: "run_tests", Arguments: map[string]any{"package": "./pkg/server", "verbose": true, "count": int64(1)}}}}
	case 2:
		return message.Message{Role: message.RoleTool, ToolCallID: id, Name: "run_tests",
			Text: "--- FAIL: TestHandler (0.01s)\n    handler_test.go:42: got status 500, want 200\nFAIL\nexit status 1\nFAIL\tgithub.com/example/pkg/server\t0.012s"}
	default:
		return message.Message{Role: message.RoleAssistant, Model: "mock-large",
			Text:  "The handler returns 500 because the request body is read twice; the second read sees EOF.",
			Usage: map[string]any{"input_tokens": int64(1200 + i), "output_tokens": int64(40)}}
	}
}

// kilobyte returns a user message of about 1 KB of JSON.
func kilobyte(i int) message.Message {
	line := fmt.Sprintf("Message %d. The quick brown fox jumps over the lazy dog; it is a typical line of prose. ", i)
	return message.Message{Role: message.RoleUser, Text: strings.Repeat(line, 1000/len(line)+1)[:1000]}
}

// fill creates session id with n messages made by msg, appended in
// writes of 1000, each message with the "message" event the store logs
// for it when events is set.
func fill(b *testing.B, be *Backend, id string, n int, msg func(int) message.Message, events bool) {
	b.Helper()
	ctx := b.Context()
	now := time.Now()
	if err := be.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	for v := 0; v*1000 < n; v++ {
		ch := &sessions.Change{}
		for i := v * 1000; i < min(n, (v+1)*1000); i++ {
			m := msg(i)
			ch.Append = append(ch.Append, m)
			if events {
				ch.Events = append(ch.Events, sessions.Event{Seq: int64(i + 1), Type: sessions.EventMessage, Time: now,
					CorrID: m.ToolCallID, Data: map[string]any{"index": int64(i), "role": m.Role}})
			}
		}
		if err := be.Write(ctx, id, int64(v), ch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad100k loads a stored session of 100,000 typical messages:
// all of it, its metadata only, a fork of it through its shared prefix,
// and one that also has the 100,000 "message" events the store logs,
// whole and without its log (LoadTranscript, what resuming reads).
func BenchmarkLoad100k(b *testing.B) {
	const n = 100_000
	be := openClosed(b, filepath.Join(b.TempDir(), "sessions.db"))
	fill(b, be, "big", n, typical, false)
	fill(b, be, "logged", n, typical, true)
	now := time.Now()
	spec := &sessions.ForkSpec{Src: "big", SrcVersion: n / 1000, KeepFirst: n, SrcTime: now,
		SrcEvent: sessions.Event{Seq: 1, Type: sessions.EventFork, Time: now},
		Dst:      sessions.Record{ID: "fork", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}}
	if err := be.Fork(b.Context(), spec); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		load func() (*sessions.Record, error)
		want int
	}{
		{"Load", func() (*sessions.Record, error) { return be.Load(b.Context(), "big") }, n},
		{"LoadMeta", func() (*sessions.Record, error) { return be.LoadMeta(b.Context(), "big") }, 0},
		{"LoadFork", func() (*sessions.Record, error) { return be.Load(b.Context(), "fork") }, n},
		{"LoadWithEvents", func() (*sessions.Record, error) { return be.Load(b.Context(), "logged") }, n},
		{"LoadTranscript", func() (*sessions.Record, error) {
			rec, _, err := be.LoadTranscript(b.Context(), "logged")
			return rec, err
		}, n},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				rec, err := tc.load()
				if err != nil {
					b.Fatal(err)
				}
				if len(rec.Messages) != tc.want {
					b.Fatalf("%d messages, want %d", len(rec.Messages), tc.want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/load")
		})
	}
}

// BenchmarkAppend appends one message per Write, each with the "message"
// event the store logs, each committed to disk before it returns
// (synchronous=FULL).
func BenchmarkAppend(b *testing.B) {
	be := openClosed(b, filepath.Join(b.TempDir(), "sessions.db"))
	ctx := b.Context()
	now := time.Now()
	if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		m := typical(0) // a user message: valid after any earlier one
		ch := &sessions.Change{Append: []message.Message{m}, UpdatedAt: now,
			Events: []sessions.Event{{Seq: int64(i + 1), Type: sessions.EventMessage, Time: now, Data: map[string]any{"index": int64(i), "role": m.Role}}}}
		if err := be.Write(ctx, "s", int64(i), ch); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// totalChanges returns the rows inserted, updated or deleted through the
// backend's connection; the caller has limited the pool to one.
func totalChanges(b *testing.B, be *Backend) int64 {
	b.Helper()
	var n int64
	if err := be.db.QueryRow("SELECT total_changes()").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkFork forks a session of 10 and one of 100,000 messages (keeping
// all of them) and reports the rows each fork writes, counted by SQLite
// (total_changes: the child's row, its frozen base view, the two fork
// events and the update of the source). The ratio sub-benchmark forks
// both in turn and reports how much longer the long one takes.
func BenchmarkFork(b *testing.B) {
	be := openClosed(b, filepath.Join(b.TempDir(), "sessions.db"))
	// Two connections: the Backend's write connection (fill's writes) and
	// one for everything else, so total_changes counts every fork.
	be.db.SetMaxOpenConns(2)
	sizes := []int{10, 100_000}
	versions := map[string]int64{}
	for _, n := range sizes {
		id := fmt.Sprint("src", n)
		fill(b, be, id, n, typical, false)
		versions[id] = int64((n + 999) / 1000)
	}
	forks := 0
	fork := func(b *testing.B, n int) {
		src := fmt.Sprint("src", n)
		now := time.Now()
		forks++
		spec := &sessions.ForkSpec{Src: src, SrcVersion: versions[src], KeepFirst: n, SrcTime: now,
			SrcEvent: sessions.Event{Seq: versions[src], Type: sessions.EventFork, Time: now},
			Dst: sessions.Record{ID: fmt.Sprint("fork", forks), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
				Events: []sessions.Event{{Seq: 1, Type: sessions.EventFork, Time: now}}}}
		if err := be.Fork(b.Context(), spec); err != nil {
			b.Fatal(err)
		}
		versions[src]++
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("msgs=%d", n), func(b *testing.B) {
			before := totalChanges(b, be)
			for b.Loop() {
				fork(b, n)
			}
			b.ReportMetric(float64(totalChanges(b, be)-before)/float64(b.N), "rows/fork")
		})
	}
	b.Run("ratio", func(b *testing.B) {
		var short, long time.Duration
		for b.Loop() {
			start := time.Now()
			fork(b, sizes[0])
			mid := time.Now()
			fork(b, sizes[1])
			short, long = short+mid.Sub(start), long+time.Since(mid)
		}
		b.ReportMetric(float64(long)/float64(short), "100k/10")
	})
}

// BenchmarkDiskPerMessage appends 1 KB messages, 100 per Write, and
// reports the database's size per stored message after a checkpoint.
func BenchmarkDiskPerMessage(b *testing.B) {
	const batch = 100
	path := filepath.Join(b.TempDir(), "sessions.db")
	be := openClosed(b, path)
	ctx := b.Context()
	size := func() int64 {
		if _, err := be.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			b.Fatal(err)
		}
		var pages, pageSize int64
		if err := be.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
			b.Fatal(err)
		}
		if err := be.db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
			b.Fatal(err)
		}
		return pages * pageSize
	}
	now := time.Now()
	if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	empty := size()
	body, _ := json.Marshal(kilobyte(0))
	v := 0
	for b.Loop() {
		msgs := make([]message.Message, batch)
		for i := range msgs {
			msgs[i] = kilobyte(v*batch + i)
		}
		if err := be.Write(ctx, "s", int64(v), &sessions.Change{Append: msgs}); err != nil {
			b.Fatal(err)
		}
		v++
	}
	n := float64(v * batch)
	b.ReportMetric(float64(size()-empty)/n, "disk-bytes/msg")
	b.ReportMetric(float64(len(body)), "json-bytes/msg")
}

// withID is typical(i) as the store appends it: with an id and a time.
func withID(i int) message.Message {
	m := typical(i)
	m.ID = sessions.NewMessageID()
	m.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return m
}

// BenchmarkMessageIDs measures what a message's id and created_at cost,
// side by side with the same messages without them: loading a session of
// 10,000 typical messages, and encoding one message for its row.
func BenchmarkMessageIDs(b *testing.B) {
	const n = 10_000
	be := openClosed(b, filepath.Join(b.TempDir(), "sessions.db"))
	fill(b, be, "plain", n, typical, false)
	fill(b, be, "ids", n, withID, false)
	for _, id := range []string{"plain", "ids"} {
		b.Run("Load/"+id, func(b *testing.B) {
			for b.Loop() {
				rec, err := be.Load(b.Context(), id)
				if err != nil || len(rec.Messages) != n {
					b.Fatalf("%v, %d messages", err, len(rec.Messages))
				}
			}
		})
	}
	for name, m := range map[string]message.Message{"plain": typical(1), "ids": withID(1)} {
		b.Run("Encode/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkList measures a first page of 20 sessions with each filter of
// sessionstest.ListFilters over 10,000 and over 100,000 stored sessions,
// side by side (sessionstest.BenchList): the listings read the matching
// rows through indexes and count at most 1000 of them, so they stay flat
// in the number of sessions. The sessions are stored once per process
// (a -count run reuses them) and removed by TestMain; with
// SKEIN_LIST_FIXTURES set to a directory (sessionstest.FixturesEnv) they
// are stored there once and kept, and later runs migrate and reuse them.
func BenchmarkList(b *testing.B) {
	if listBench.backends == nil {
		dir := os.Getenv(sessionstest.FixturesEnv)
		if dir == "" {
			tmp, err := os.MkdirTemp("", "skein-listbench-")
			if err != nil {
				b.Fatal(err)
			}
			listBench.cleanup = append(listBench.cleanup, func() { os.RemoveAll(tmp) })
			dir = tmp
		}
		for _, n := range sessionstest.ListSizes {
			path := filepath.Join(dir, fmt.Sprint("sqlite-", n, ".db"))
			if _, err := Migrate(path); err != nil {
				b.Fatal(err)
			}
			be, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			listBench.cleanup = append(listBench.cleanup, func() { be.Close() })
			if !sessionstest.FilledForList(b, be, n) {
				sessionstest.FillForList(b, be, n, 4)
			}
			listBench.backends = append(listBench.backends, be)
		}
	}
	sessionstest.BenchList(b, listBench.backends)
}

// listBench holds BenchmarkList's backends for the process, and what
// TestMain calls to remove them, last first.
var listBench struct {
	backends []sessions.Backend
	cleanup  []func()
}
