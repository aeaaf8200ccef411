package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// The PostgreSQL benchmarks run against the test database that
// SKEIN_TEST_POSTGRES names, each in a schema of its own, and skip
// without it. Durable means a commit is on the server's disk when it
// returns: durability full, synchronous_commit=on (the server's default,
// which the test DSN turns off for the tests' speed).

// openPostgres opens a backend on a new schema of the test database at
// durability full.
func openPostgres(b *testing.B, dsn string) *postgres.Backend {
	b.Helper()
	if _, err := postgres.Migrate(context.Background(), dsn); err != nil {
		b.Fatal(err)
	}
	pb, err := postgres.Open(context.Background(), dsn, postgres.WithDurability(sessions.DurabilityFull))
	if err != nil {
		b.Fatal(err)
	}
	return pb
}

// pgBackend is the PostgreSQL backend counting the writes (commits) that
// reach it and timing the first. With shared set, Close leaves it open
// (a round's runs share it: see BenchmarkPostgresW2).
type pgBackend struct {
	*postgres.Backend
	writes int
	first  time.Duration
	shared bool
}

func (c *pgBackend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	c.writes++
	if c.writes > 1 {
		return c.Backend.Write(ctx, id, base, changes...)
	}
	start := time.Now()
	err := c.Backend.Write(ctx, id, base, changes...)
	c.first = time.Since(start)
	return err
}

func (c *pgBackend) Close() error {
	if c.shared {
		return nil
	}
	return c.Backend.Close()
}

// runPostgres runs workload file with argument n over a new store on
// the database dsn at durability full.
func runPostgres(b *testing.B, file, dsn string, n int) result {
	b.Helper()
	return runShared(b, file, &pgBackend{Backend: openPostgres(b, dsn)}, n)
}

// runShared runs workload file with argument n over a new store on c,
// counting the commits of this run only.
func runShared(b *testing.B, file string, c *pgBackend, n int) result {
	b.Helper()
	before := c.writes
	res := runOn(b, file, c, n)
	res.commits = c.writes - before
	return res
}

// pgRawConn opens a connection to the database dsn with
// synchronous_commit=on and makes table bench_raw anew, for
// pgRawInserts.
func pgRawConn(b *testing.B, dsn string) *pgx.Conn {
	b.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "on"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `DROP TABLE IF EXISTS bench_raw; CREATE TABLE bench_raw (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return conn
}

// pgRawInserts makes n single-row INSERTs of an 80-byte body into table
// bench_raw on conn (pgRawConn) and returns µs per insert. Each is its own
// transaction: with explicit false, an autocommit INSERT (pgbench's
// single-row insert and commit, one round trip); with explicit true,
// BEGIN, the INSERT and COMMIT, each a round trip, as a client writes a
// row in a transaction of its own.
func pgRawInserts(b *testing.B, conn *pgx.Conn, n int, explicit bool) float64 {
	b.Helper()
	ctx := context.Background()
	body := `{"role":"user","text":"message 1: a short note of about eighty bytes of text."}`
	start := time.Now()
	for range n {
		if !explicit {
			if _, err := conn.Exec(ctx, `INSERT INTO bench_raw (body) VALUES ($1)`, body); err != nil {
				b.Fatal(err)
			}
			continue
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO bench_raw (body) VALUES ($1)`, body); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(n)
}

// blocks is how many alternating blocks a round of the PostgreSQL
// benchmarks splits its work into: the server's disk is shared, and its
// flush time drifts by several times within seconds, so the two sides
// of a comparison take turns in short blocks and each sees the same
// conditions.
const blocks = 10

// BenchmarkPostgresW2 runs W2 over PostgreSQL at durability full (every
// commit on the server's disk when it returns), the same number of raw
// single-row writes on the same server, autocommit INSERTs (pgbench's
// simplest write) and explicit BEGIN/INSERT/COMMITs, and W2 over SQLite
// at durability full, taking turns in blocks of 20 messages (200 a
// round). It reports the medians of the rounds: µs per message on each
// store and per raw write, the rate of W2 on PostgreSQL over each raw
// rate (`inject/tx-rate` against BEGIN/INSERT/COMMIT, the target at
// least 0.8; `inject/raw-rate` against autocommit), PostgreSQL's time
// over SQLite's, and commits per message. Run it with -benchtime Nx for
// N rounds.
func BenchmarkPostgresW2(b *testing.B) {
	dsn := pgtest.DSN(b)
	const per = w2FullN / blocks
	var pg, lite, raw, rawTx, rate, txRate, ratio, commits, first []float64
	for b.Loop() {
		var p, s, r, t float64
		var c int
		pb := &pgBackend{Backend: openPostgres(b, dsn), shared: true}
		conn := pgRawConn(b, dsn)
		for range blocks {
			w := runShared(b, "w2.star", pb, per)
			p, c = p+w.perItem()/blocks, c+w.commits
			r += pgRawInserts(b, conn, per, false) / blocks
			t += pgRawInserts(b, conn, per, true) / blocks
			s += run(b, "w2.star", string(sessions.DurabilityFull), per, false).perItem() / blocks
		}
		conn.Close(context.Background())
		pb.Backend.Close()
		pg, lite, raw, rawTx = append(pg, p), append(lite, s), append(raw, r), append(rawTx, t)
		rate, txRate, ratio = append(rate, r/p), append(txRate, t/p), append(ratio, p/s)
		commits = append(commits, float64(c)/float64(blocks*per))
		first = append(first, float64(pb.first.Microseconds()))
	}
	b.ReportMetric(median(pg), "postgres-µs/msg")
	b.ReportMetric(median(first), "pg-first-µs")
	b.ReportMetric(median(lite), "sqlite-µs/msg")
	b.ReportMetric(median(raw), "pg-raw-µs/insert")
	b.ReportMetric(median(rawTx), "pg-tx-µs/insert")
	b.ReportMetric(median(rate), "inject/raw-rate")
	b.ReportMetric(median(txRate), "inject/tx-rate")
	b.ReportMetric(median(ratio), "postgres/sqlite")
	b.ReportMetric(median(commits), "commits/msg")
}

// BenchmarkPostgresW1 runs W1 over PostgreSQL and over SQLite, both at
// durability full, taking turns in blocks of 20 iterations (200 a
// round), and reports the medians of the rounds: µs per iteration of
// each, their ratio, and commits per iteration on PostgreSQL.
func BenchmarkPostgresW1(b *testing.B) {
	dsn := pgtest.DSN(b)
	const per = w1FullN / blocks
	var pg, lite, ratio, commits []float64
	for b.Loop() {
		var p, s float64
		var c int
		for range blocks {
			w := runPostgres(b, "w1.star", dsn, per)
			p, c = p+w.perItem()/blocks, c+w.commits
			s += run(b, "w1.star", string(sessions.DurabilityFull), per, false).perItem() / blocks
		}
		pg, lite = append(pg, p), append(lite, s)
		ratio = append(ratio, p/s)
		commits = append(commits, float64(c)/float64(blocks*per))
	}
	b.ReportMetric(median(pg), "postgres-µs/iter")
	b.ReportMetric(median(lite), "sqlite-µs/iter")
	b.ReportMetric(median(ratio), "postgres/sqlite")
	b.ReportMetric(median(commits), "commits/iter")
}

// tableRows returns the rows of every skein_ table of the schema.
func tableRows(b *testing.B, pb *postgres.Backend) int {
	b.Helper()
	total := 0
	for _, table := range []string{"skein_sessions", "skein_views", "skein_messages", "skein_events"} {
		var n int
		if err := pb.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			b.Fatal(err)
		}
		total += n
	}
	return total
}

// BenchmarkPostgresFork forks a 100,000-message session and a 10-message
// one on PostgreSQL at durability full, alternately, and reports the
// medians of the fork times, their ratio (a fork costs O(1) in the
// transcript's length: the target is under 2), and the rows each fork
// wrote in all of skein's tables.
func BenchmarkPostgresFork(b *testing.B) {
	const long, short = 100_000, 10
	pb := openPostgres(b, pgtest.DSN(b))
	defer pb.Close()
	ctx := context.Background()
	now := time.Now()
	for _, n := range []int{long, short} {
		rec := &sessions.Record{ID: fmt.Sprint("src-", n), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}
		for i := range n {
			rec.Messages = append(rec.Messages, message.Message{Role: message.RoleUser, Text: fmt.Sprintf("message %d: %s", i, strings.Repeat("x", 60))})
		}
		if err := pb.Create(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	versions := map[int]int64{}
	fork := func(n, round int) (time.Duration, int) {
		before := tableRows(b, pb)
		src := fmt.Sprint("src-", n)
		spec := &sessions.ForkSpec{Src: src, SrcVersion: versions[n], KeepFirst: n, SrcTime: now,
			SrcEvent: sessions.Event{Seq: versions[n] + 1, Type: sessions.EventFork, Time: now},
			Dst:      sessions.Record{ID: fmt.Sprintf("fork-%d-%d", n, round), Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}}
		start := time.Now()
		if err := pb.Fork(ctx, spec); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		versions[n]++
		return d, tableRows(b, pb) - before
	}
	var longT, shortT, ratio, longRows, shortRows []float64
	round := 0
	for b.Loop() {
		l, lr := fork(long, round)
		s, sr := fork(short, round)
		round++
		longT, shortT = append(longT, float64(l.Microseconds())), append(shortT, float64(s.Microseconds()))
		ratio = append(ratio, float64(l)/float64(s))
		longRows, shortRows = append(longRows, float64(lr)), append(shortRows, float64(sr))
	}
	b.ReportMetric(median(longT), "fork-100k-µs")
	b.ReportMetric(median(shortT), "fork-10-µs")
	b.ReportMetric(median(ratio), "100k/10")
	b.ReportMetric(median(longRows), "rows-100k")
	b.ReportMetric(median(shortRows), "rows-10")
}
