package bench

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/vm"
)

// The floor benchmarks ask how fast the durable path could be if skein
// did nothing but SQLite's part of it: they replay the rows a W1
// iteration and a W2 inject store, taken from a real run, straight into
// a SQLite file through prepared statements on one connection, with no
// Starlark, no session bookkeeping and no encoding, and compare that
// with the in-memory workloads measured in the same round. What durable
// ÷ in-memory (W1) or inject ÷ raw (W2) could at best be follows:
// (in-memory + floor) ÷ in-memory, raw ÷ (in-memory + floor).
//
// Each replays two layouts:
//
//   - "tables": the tables of schema version 8, before a write became one
//     row: the session's row updated, one row per message, one row per
//     event, each its own INSERT, between BEGIN IMMEDIATE and COMMIT. The
//     UPDATE sets only the columns every append changed, so it is a
//     floor of the real one.
//   - "one-row": skein's table writes (schema version 9): everything one
//     write stores, its messages' and events' bytes, in one row keyed by
//     its session and version, one INSERT between BEGIN IMMEDIATE and
//     COMMIT.

// floorRows is what one write stores: message bodies and events, as
// their columns.
type floorRows struct {
	messages []string
	events   []floorEvent
}

type floorEvent struct {
	typ, corrID, data string
	message           bool // a "message" event, which records its message's position
}

// bytes is every column of the rows, joined: the one-row layout's
// blobs, near enough.
func (r floorRows) bytes() (messages, events []byte) {
	for _, m := range r.messages {
		messages = append(messages, m...)
	}
	for _, e := range r.events {
		events = append(append(append(events, e.typ...), e.corrID...), e.data...)
	}
	return messages, events
}

// capturedRows runs workload file with argument n over a new SQLite
// store and returns what one write stored: the messages at positions
// [from, to) and the events with seq in [seqFrom, seqTo), encoded as
// skein stores them.
func capturedRows(b *testing.B, file string, n int, from, to, seqFrom, seqTo int64) floorRows {
	b.Helper()
	be, err := sqlite.Open(filepath.Join(b.TempDir(), "captured.db"))
	if err != nil {
		b.Fatal(err)
	}
	store, err := sessions.NewStore(be)
	if err != nil {
		b.Fatal(err)
	}
	st, err := builtins.NewState(vm.Options{Store: store, Args: []string{strconv.Itoa(n)}, Stdout: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	exec(b, st, file)
	list, _, err := be.List(b.Context(), sessions.ListFilter{})
	if err != nil || len(list) != 1 {
		b.Fatalf("%s stored %d sessions (%v), want 1", file, len(list), err)
	}
	rec, err := be.Load(b.Context(), list[0].ID)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Shutdown(); err != nil {
		b.Fatal(err)
	}
	var rows floorRows
	for _, m := range rec.Messages[from:to] {
		body, err := m.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		rows.messages = append(rows.messages, string(body))
	}
	for _, e := range rec.Events {
		if e.Seq < seqFrom || e.Seq >= seqTo {
			continue
		}
		data, err := jsonvalue.Encode(e.Data)
		if err != nil {
			b.Fatal(err)
		}
		rows.events = append(rows.events, floorEvent{typ: e.Type, corrID: e.CorrID, data: string(data), message: e.Type == sessions.EventMessage})
	}
	if len(rows.messages) != int(to-from) || len(rows.events) != int(seqTo-seqFrom) {
		b.Fatalf("%s: read %d messages and %d events, want %d and %d", file, len(rows.messages), len(rows.events), to-from, seqTo-seqFrom)
	}
	return rows
}

// floorDB is a new SQLite session database (skein's schema, made by
// sqlite.Open, and the tables of schema version 8 beside it) opened raw
// at durability process without automatic checkpoints, with a session
// (sid 1) in both, on one connection. It returns a function that
// prepares a statement on the connection.
func floorDB(b *testing.B) func(query string) *sql.Stmt {
	b.Helper()
	path := filepath.Join(b.TempDir(), "floor.db")
	be, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
	db := rawDB(b, path, string(sessions.DurabilityProcess))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	for _, q := range []string{
		// As the backend: no checkpoint inside a commit (it checkpoints
		// on a goroutine of its own; see replay).
		`PRAGMA wal_autocheckpoint = 0`,
		`PRAGMA foreign_keys = ON`,
		`INSERT INTO sessions (sid, id, status, created_at, max_turns) VALUES (1, 'floor', 'active', 0, 0)`,
		`CREATE TABLE sessions8 (sid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, version INTEGER NOT NULL,
			length INTEGER NOT NULL, turns INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT`,
		`INSERT INTO sessions8 VALUES (1, 'floor', 0, 0, 0, 0)`,
		`CREATE TABLE messages8 (sid INTEGER NOT NULL REFERENCES sessions8 (sid) ON DELETE CASCADE, pos INTEGER NOT NULL,
			body TEXT NOT NULL, crc INTEGER, PRIMARY KEY (sid, pos)) STRICT, WITHOUT ROWID`,
		`CREATE TABLE events8 (sid INTEGER NOT NULL REFERENCES sessions8 (sid) ON DELETE CASCADE, seq INTEGER NOT NULL,
			type TEXT NOT NULL, time INTEGER NOT NULL, corr_id TEXT, data TEXT, pos INTEGER, PRIMARY KEY (sid, seq)) STRICT, WITHOUT ROWID`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	prepare := func(query string) *sql.Stmt {
		s, err := conn.PrepareContext(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	return prepare
}

// replay makes n writes of rows into a new floorDB in each layout and
// returns the µs per write of each. Every 100 writes it restarts the
// write-ahead log, as the backend's checkpoints do (a log that only
// grows makes every write extend the file, which costs more than
// writing over it), and does not count the time that takes: the
// backend checkpoints on another goroutine.
func replay(b *testing.B, rows floorRows, n int) (tables, oneRow float64) {
	b.Helper()
	prepare := floorDB(b)
	exec := func(s *sql.Stmt, args ...any) {
		if _, err := s.Exec(args...); err != nil {
			b.Fatal(err)
		}
	}
	restart := prepare(`PRAGMA wal_checkpoint(RESTART)`)
	var uncounted time.Duration
	checkpoint := func(v int64) {
		if v%100 == 99 {
			t := time.Now()
			exec(restart)
			uncounted += time.Since(t)
		}
	}
	begin, commit := prepare(`BEGIN IMMEDIATE`), prepare(`COMMIT`)
	update := prepare(`UPDATE sessions8 SET version = version + 1, length = ?, turns = turns + 1, updated_at = ? WHERE sid = 1 AND version = ?`)
	message := prepare(`INSERT INTO messages8 (sid, pos, body, crc) VALUES (1, ?, ?, ?)`)
	event := prepare(`INSERT INTO events8 (sid, seq, type, time, corr_id, data, pos) VALUES (1, ?, ?, ?, ?, ?, ?)`)
	// Session row 1's rows: keys from 1<<32 on (see sessions/sqlite's writeKey).
	write := prepare(`INSERT INTO writes (key, version, length, base_from, base_to, own_from, turns, updated_at,
		pos, pos_end, seq, seq_end, messages, events) VALUES ((1 << 32) + (1 << 31) + ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?, ?, ?, ?)`)

	pos, seq := int64(0), int64(0)
	start := time.Now()
	for v := range int64(n) {
		exec(begin)
		exec(update, pos+int64(len(rows.messages)), time.Now().UnixNano(), v)
		for _, m := range rows.messages {
			exec(message, pos, m, int64(len(m)))
			pos++
		}
		for _, e := range rows.events {
			seq++
			var p any
			if e.message {
				p = pos - 1
			}
			exec(event, seq, e.typ, time.Now().UnixNano(), e.corrID, e.data, p)
		}
		exec(commit)
		checkpoint(v)
	}
	tables = float64((time.Since(start) - uncounted).Microseconds()) / float64(n)

	msgs, events := rows.bytes()
	nm, ne := int64(len(rows.messages)), int64(len(rows.events))
	start, uncounted = time.Now(), 0
	for v := range int64(n) {
		exec(begin)
		exec(write, v, v+1, (v+1)*nm, v+1, time.Now().UnixNano(), v*nm, (v+1)*nm, v*ne+1, (v+1)*ne+1, msgs, events)
		exec(commit)
		checkpoint(v)
	}
	oneRow = float64((time.Since(start) - uncounted).Microseconds()) / float64(n)
	return tables, oneRow
}

// BenchmarkW1Floor reports, per W1 iteration (N = 1000), the in-memory
// loop's time, the floor of SQLite's part in each layout (an iteration
// of W1 is one write: two messages and seven events), and the best
// durable ÷ in-memory ratio each layout allows, medians of the rounds.
func BenchmarkW1Floor(b *testing.B) {
	// Iteration 7 of a 20-iteration run: its write stores messages 13
	// and 14 and events 44 to 50 (turn_start to turn_end).
	rows := capturedRows(b, "w1.star", 20, 13, 15, 44, 51)
	var mem, tables, oneRow, tablesBest, oneRowBest []float64
	for b.Loop() {
		m := run(b, "w1.star", memory, w1N, false).perItem()
		s, o := replay(b, rows, w1N)
		mem, tables, oneRow = append(mem, m), append(tables, s), append(oneRow, o)
		tablesBest, oneRowBest = append(tablesBest, (m+s)/m), append(oneRowBest, (m+o)/m)
		b.Logf("round %d: memory %.1f µs per iteration; floor: tables %.1f (best ratio %.2f), one row %.1f (%.2f)",
			len(mem), m, s, tablesBest[len(tablesBest)-1], o, oneRowBest[len(oneRowBest)-1])
	}
	b.ReportMetric(median(mem), "memory-µs/iter")
	b.ReportMetric(median(tables), "tables-floor-µs/iter")
	b.ReportMetric(median(oneRow), "one-row-floor-µs/iter")
	b.ReportMetric(median(tablesBest), "tables-best-process/memory")
	b.ReportMetric(median(oneRowBest), "one-row-best-process/memory")
}

// BenchmarkW2Floor reports, per W2 message (N = 1000), the in-memory
// inject's time, the raw INSERT+COMMIT BenchmarkW2 compares with, the
// floor of SQLite's part of an inject in each layout (an inject is one
// write: its message and its "message" event), and the best inject ÷
// raw rate each layout allows, medians of the rounds.
func BenchmarkW2Floor(b *testing.B) {
	// Message 7 of a 20-message run and its event, seq 8.
	rows := capturedRows(b, "w2.star", 20, 7, 8, 8, 9)
	var mem, raw, tables, oneRow, tablesBest, oneRowBest []float64
	for b.Loop() {
		m := run(b, "w2.star", memory, w2N, false).perItem()
		r, _ := rawInserts(b, string(sessions.DurabilityProcess), w2N)
		s, o := replay(b, rows, w2N)
		mem, raw, tables, oneRow = append(mem, m), append(raw, r), append(tables, s), append(oneRow, o)
		tablesBest, oneRowBest = append(tablesBest, r/(m+s)), append(oneRowBest, r/(m+o))
		b.Logf("round %d: memory %.1f µs per inject, raw %.1f; floor: tables %.1f (best rate %.2f), one row %.1f (%.2f)",
			len(mem), m, r, s, tablesBest[len(tablesBest)-1], o, oneRowBest[len(oneRowBest)-1])
	}
	b.ReportMetric(median(mem), "memory-µs/msg")
	b.ReportMetric(median(raw), "raw-µs/insert")
	b.ReportMetric(median(tables), "tables-floor-µs/msg")
	b.ReportMetric(median(oneRow), "one-row-floor-µs/msg")
	b.ReportMetric(median(tablesBest), "tables-best-inject/raw")
	b.ReportMetric(median(oneRowBest), "one-row-best-inject/raw")
}
