package bench

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
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
//   - "schema": the tables skein uses (schema version 8): the session's
//     row updated, one row per message, one row per event, each its own
//     INSERT, between BEGIN IMMEDIATE and COMMIT, as the SQLite backend's
//     write does. The UPDATE sets only the columns every append changes,
//     so it is a floor of the real one.
//   - "one-row": everything one write stores (its messages' and events'
//     bytes together) as one row of a table keyed by (session, version),
//     the least a write could do: one INSERT, whose key is the version
//     check.

// floorRows is what one write stores: message bodies and events, as
// their columns.
type floorRows struct {
	messages []string
	events   []floorEvent
}

type floorEvent struct {
	typ, data string
	corrID    sql.NullString
	pos       sql.NullInt64
}

// bytes is every column of the rows, joined: the one-row layout's row.
func (r floorRows) bytes() string {
	var sb strings.Builder
	for _, m := range r.messages {
		sb.WriteString(m)
	}
	for _, e := range r.events {
		sb.WriteString(e.typ)
		sb.WriteString(e.corrID.String)
		sb.WriteString(e.data)
	}
	return sb.String()
}

// capturedRows runs workload file with argument n over a new SQLite
// store and reads back the rows one write stored: the messages at
// positions [from, to) and the events with seq in [seqFrom, seqTo).
func capturedRows(b *testing.B, file string, n int, from, to, seqFrom, seqTo int64) floorRows {
	b.Helper()
	path := filepath.Join(b.TempDir(), "captured.db")
	be, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	runOn(b, file, be, n)
	db := rawDB(b, path, string(sessions.DurabilityProcess))
	var rows floorRows
	ms, err := db.Query(`SELECT body FROM messages WHERE pos >= ? AND pos < ? ORDER BY pos`, from, to)
	if err != nil {
		b.Fatal(err)
	}
	for ms.Next() {
		var body string
		if err := ms.Scan(&body); err != nil {
			b.Fatal(err)
		}
		rows.messages = append(rows.messages, body)
	}
	ms.Close()
	es, err := db.Query(`SELECT type, corr_id, data, pos FROM events WHERE seq >= ? AND seq < ? ORDER BY seq`, seqFrom, seqTo)
	if err != nil {
		b.Fatal(err)
	}
	for es.Next() {
		var e floorEvent
		if err := es.Scan(&e.typ, &e.corrID, &e.data, &e.pos); err != nil {
			b.Fatal(err)
		}
		rows.events = append(rows.events, e)
	}
	es.Close()
	if len(rows.messages) != int(to-from) || len(rows.events) != int(seqTo-seqFrom) {
		b.Fatalf("%s: read %d messages and %d events, want %d and %d", file, len(rows.messages), len(rows.events), to-from, seqTo-seqFrom)
	}
	return rows
}

// floorDB is a new SQLite session database (skein's schema, made by
// sqlite.Open) opened raw at durability process without automatic
// checkpoints, with a session row (sid 1) and the one-row layout's
// table, on one connection. It returns a function that prepares a
// statement on the connection.
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
		`INSERT INTO sessions (sid, id, status, created_at, updated_at, turns, max_turns, version, base_from, base_to, own_from, length)
			VALUES (1, 'floor', 'active', 0, 0, 0, 0, 0, 0, 0, 0, 0)`,
		`CREATE TABLE writes (sid INTEGER NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (sid, version)) STRICT, WITHOUT ROWID`,
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
func replay(b *testing.B, rows floorRows, n int) (schema, oneRow float64) {
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
	update := prepare(`UPDATE sessions SET version = version + 1, length = ?, turns = turns + 1, updated_at = ? WHERE sid = 1 AND version = ?`)
	message := prepare(`INSERT INTO messages (sid, pos, body, crc) VALUES (1, ?, ?, ?)`)
	event := prepare(`INSERT INTO events (sid, seq, type, time, corr_id, data, pos) VALUES (1, ?, ?, ?, ?, ?, ?)`)
	write := prepare(`INSERT INTO writes (sid, version, body) VALUES (1, ?, ?)`)

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
			p := e.pos
			if p.Valid {
				p.Int64 = pos - 1
			}
			exec(event, seq, e.typ, time.Now().UnixNano(), e.corrID, e.data, p)
		}
		exec(commit)
		checkpoint(v)
	}
	schema = float64((time.Since(start) - uncounted).Microseconds()) / float64(n)

	body := rows.bytes()
	start, uncounted = time.Now(), 0
	for v := range int64(n) {
		exec(begin)
		exec(write, v+1, body)
		exec(commit)
		checkpoint(v)
	}
	oneRow = float64((time.Since(start) - uncounted).Microseconds()) / float64(n)
	return schema, oneRow
}

// BenchmarkW1Floor reports, per W1 iteration (N = 1000), the in-memory
// loop's time, the floor of SQLite's part in each layout (an iteration
// of W1 is one write: two messages and seven events), and the best
// durable ÷ in-memory ratio each layout allows, medians of the rounds.
func BenchmarkW1Floor(b *testing.B) {
	// Iteration 7 of a 20-iteration run: its write stores messages 13
	// and 14 and events 44 to 50 (turn_start to turn_end).
	rows := capturedRows(b, "w1.star", 20, 13, 15, 44, 51)
	var mem, schema, oneRow, schemaBest, oneRowBest []float64
	for b.Loop() {
		m := run(b, "w1.star", memory, w1N, false).perItem()
		s, o := replay(b, rows, w1N)
		mem, schema, oneRow = append(mem, m), append(schema, s), append(oneRow, o)
		schemaBest, oneRowBest = append(schemaBest, (m+s)/m), append(oneRowBest, (m+o)/m)
		b.Logf("round %d: memory %.1f µs per iteration; floor: schema %.1f (best ratio %.2f), one row %.1f (%.2f)",
			len(mem), m, s, schemaBest[len(schemaBest)-1], o, oneRowBest[len(oneRowBest)-1])
	}
	b.ReportMetric(median(mem), "memory-µs/iter")
	b.ReportMetric(median(schema), "schema-floor-µs/iter")
	b.ReportMetric(median(oneRow), "one-row-floor-µs/iter")
	b.ReportMetric(median(schemaBest), "schema-best-process/memory")
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
	var mem, raw, schema, oneRow, schemaBest, oneRowBest []float64
	for b.Loop() {
		m := run(b, "w2.star", memory, w2N, false).perItem()
		r, _ := rawInserts(b, string(sessions.DurabilityProcess), w2N)
		s, o := replay(b, rows, w2N)
		mem, raw, schema, oneRow = append(mem, m), append(raw, r), append(schema, s), append(oneRow, o)
		schemaBest, oneRowBest = append(schemaBest, r/(m+s)), append(oneRowBest, r/(m+o))
		b.Logf("round %d: memory %.1f µs per inject, raw %.1f; floor: schema %.1f (best rate %.2f), one row %.1f (%.2f)",
			len(mem), m, r, s, schemaBest[len(schemaBest)-1], o, oneRowBest[len(oneRowBest)-1])
	}
	b.ReportMetric(median(mem), "memory-µs/msg")
	b.ReportMetric(median(raw), "raw-µs/insert")
	b.ReportMetric(median(schema), "schema-floor-µs/msg")
	b.ReportMetric(median(oneRow), "one-row-floor-µs/msg")
	b.ReportMetric(median(schemaBest), "schema-best-inject/raw")
	b.ReportMetric(median(oneRowBest), "one-row-best-inject/raw")
}
