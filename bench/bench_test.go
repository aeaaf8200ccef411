package bench

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/vm"
)

// Iterations and messages per workload run. A run at durability full
// waits for the disk at every commit, so it does fewer.
const (
	w1N     = 1000
	w1FullN = 200
	w2N     = 1000
	w2FullN = 200
	// walN is the iterations (or messages) of a run that counts WAL
	// frames: few enough that no automatic checkpoint (at 1,000 frames)
	// restarts the log meanwhile.
	walN = 30
)

// memory is the store kind of a run over the in-memory store; the others
// are sessions.Durability levels of the SQLite store.
const memory = "memory"

// countingBackend is the SQLite backend counting the writes (commits)
// that reach it.
type countingBackend struct {
	*sqlite.Backend
	writes int
}

func (c *countingBackend) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	c.writes++
	return c.Backend.Write(ctx, id, base, changes...)
}

// result is what one run of a workload measured.
type result struct {
	n       int           // iterations or messages
	wall    time.Duration // from the script's start to its end marks
	cpu     time.Duration // user and system CPU time of the whole run
	commits int           // writes that reached the SQLite backend
	frames  int           // WAL frames written (walFrames runs only)
	start   time.Time     // the script's start mark
	marks   []time.Time   // W1: the end of each tool-calling turn
}

func (r result) perItem() float64 { return float64(r.wall.Microseconds()) / float64(r.n) }

func (r result) cpuPerItem() float64 { return float64(r.cpu.Microseconds()) / float64(r.n) }

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	cpu, err := processCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// processCPU returns the process's user plus system CPU time.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), err
}

// exec runs workload file on st and reads its marks; its cpu is the
// process's CPU time during the run.
func exec(b *testing.B, st *vm.State, file string) result {
	b.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime(b)
	globals, err := st.ExecFile(file, src)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	res := result{cpu: cpuTime(b) - cpu, start: starTime(globals["start"])}
	res.wall = starTime(globals["end"]).Sub(res.start)
	if marks, ok := globals["marks"].(*starlark.List); ok {
		for i := range marks.Len() {
			res.marks = append(res.marks, starTime(marks.Index(i)))
		}
	}
	return res
}

// run runs workload file (w1.star, w2.star) with argument n over a new
// store of the given kind (memory, or a durability level of a new SQLite
// file in a temporary directory). With countFrames it counts the WAL
// frames the workload writes.
func run(b *testing.B, file, kind string, n int, countFrames bool) result {
	b.Helper()
	var backend sessions.Backend = sessions.NewMemoryBackend()
	var counting *countingBackend
	var path string
	if kind != memory {
		path = filepath.Join(b.TempDir(), "sessions.db")
		sb, err := sqlite.Open(path, sqlite.WithDurability(sessions.Durability(kind)))
		if err != nil {
			b.Fatal(err)
		}
		counting = &countingBackend{Backend: sb}
		backend = counting
	}
	var raw *sql.DB
	if countFrames {
		raw = rawDB(b, path, kind)
		walFrames(b, raw, "TRUNCATE")
	}
	res := runOn(b, file, backend, n)
	if countFrames {
		res.frames = walFrames(b, raw, "PASSIVE")
	}
	if counting != nil {
		res.commits = counting.writes
	}
	return res
}

// runOn runs workload file with argument n over a new store on backend,
// which it closes.
func runOn(b *testing.B, file string, backend sessions.Backend, n int) result {
	b.Helper()
	store, err := sessions.NewStore(backend)
	if err != nil {
		b.Fatal(err)
	}
	st, err := builtins.NewState(vm.Options{Store: store, Args: []string{strconv.Itoa(n)}, Stdout: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	res := exec(b, st, file)
	res.n = n
	if err := store.Shutdown(); err != nil {
		b.Fatal(err)
	}
	return res
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func starTime(v starlark.Value) time.Time { return time.Time(v.(starlarktime.Time)) }

// rawDB opens the SQLite file at path directly, as the backend does:
// WAL, the synchronous mode of durability kind, 8 KiB pages.
func rawDB(b *testing.B, path, kind string) *sql.DB {
	b.Helper()
	sync := map[string]string{string(sessions.DurabilityProcess): "NORMAL", string(sessions.DurabilityFull): "FULL"}[kind]
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "page_size(8192)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

// walFrames checkpoints the database in the given mode and returns the
// number of frames the WAL held (PRAGMA wal_checkpoint's "log" column).
// A TRUNCATE checkpoint empties the log, so the next count starts at 0.
func walFrames(b *testing.B, db *sql.DB, mode string) int {
	b.Helper()
	var busy, log, done int
	if err := db.QueryRow("PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
		b.Fatal(err)
	}
	if busy != 0 {
		b.Fatalf("wal_checkpoint(%s): busy", mode)
	}
	return log
}

// rawInserts makes n single-row INSERTs into a new SQLite file, each its
// own transaction (INSERT and COMMIT), with the durability kind's
// synchronous mode: the floor of a durable append. It returns the time
// and the process's CPU time per insert in µs.
func rawInserts(b *testing.B, kind string, n int) (wall, cpu float64) {
	b.Helper()
	db := rawDB(b, filepath.Join(b.TempDir(), "raw.db"), kind)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := `{"role":"user","text":"message 1: a short note of about eighty bytes of text."}`
	start, cpu0 := time.Now(), cpuTime(b)
	for range n {
		if _, err := db.Exec(`INSERT INTO t (body) VALUES (?)`, body); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(n), float64((cpuTime(b) - cpu0).Microseconds()) / float64(n)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// lateEarly returns the mean turn time of the last 10% of marks over that
// of the first 10%: 1 when history does not slow iterations down.
func lateEarly(marks []time.Time) float64 {
	k := len(marks) / 10
	early := marks[k].Sub(marks[0])
	late := marks[len(marks)-1].Sub(marks[len(marks)-1-k])
	return float64(late) / float64(early)
}

// BenchmarkW1 runs W1 (N = 1000) over the in-memory store and over SQLite
// at durability process, one after the other in each round, and reports
// the medians of the rounds: µs per iteration of each, their ratio (wall
// time and CPU time, round by round), commits per iteration, the late/
// early ratio of each (flat is 1), and WAL frames per iteration (from a
// separate short run). Run it with -benchtime Nx for N rounds.
func BenchmarkW1(b *testing.B) {
	var mem, dur, ratio, cpuRatio, commits, memFlat, durFlat []float64
	for b.Loop() {
		m := run(b, "w1.star", memory, w1N, false)
		d := run(b, "w1.star", string(sessions.DurabilityProcess), w1N, false)
		mem, dur = append(mem, m.perItem()), append(dur, d.perItem())
		ratio = append(ratio, d.perItem()/m.perItem())
		cpuRatio = append(cpuRatio, d.cpuPerItem()/m.cpuPerItem())
		commits = append(commits, float64(d.commits)/float64(d.n))
		memFlat, durFlat = append(memFlat, lateEarly(m.marks)), append(durFlat, lateEarly(d.marks))
		b.Logf("round %d: memory %.1f µs per iteration, process %.1f; process/memory %.2f wall, %.2f CPU",
			len(ratio), m.perItem(), d.perItem(), ratio[len(ratio)-1], cpuRatio[len(cpuRatio)-1])
	}
	frames := run(b, "w1.star", string(sessions.DurabilityProcess), walN, true)
	b.ReportMetric(median(mem), "memory-µs/iter")
	b.ReportMetric(median(dur), "process-µs/iter")
	b.ReportMetric(median(ratio), "process/memory")
	b.ReportMetric(median(cpuRatio), "cpu-process/memory")
	b.ReportMetric(median(commits), "commits/iter")
	b.ReportMetric(median(memFlat), "memory-late/early")
	b.ReportMetric(median(durFlat), "process-late/early")
	b.ReportMetric(float64(frames.frames)/float64(frames.n), "WAL-frames/iter")
}

// BenchmarkW1Full runs W1 (N = 200) over SQLite at durability full and
// reports µs and commits per iteration; with full every commit is an
// fsync (WAL checkpoints add about one fsync per 500 commits).
func BenchmarkW1Full(b *testing.B) {
	var per, commits []float64
	for b.Loop() {
		d := run(b, "w1.star", string(sessions.DurabilityFull), w1FullN, false)
		per = append(per, d.perItem())
		commits = append(commits, float64(d.commits)/float64(d.n))
	}
	b.ReportMetric(median(per), "full-µs/iter")
	b.ReportMetric(median(commits), "commits/iter")
}

// BenchmarkW2 runs W2 over SQLite at each durability level and, in the
// same round, the same number of raw single-row INSERT+COMMITs into a new
// SQLite file in the same directory with the same synchronous mode. It
// reports the medians of the rounds: µs per message and per raw insert,
// the rate of W2 over the raw rate (1 is the floor's speed) in wall time
// and in CPU time (on a busy machine the wall times of two loops run
// one after the other swing apart; CPU time does not count the waits
// for a CPU, nor those for the disk), and WAL frames per message (from
// a separate short run).
func BenchmarkW2(b *testing.B) {
	for _, d := range sessions.Durabilities {
		n := w2N
		if d == sessions.DurabilityFull {
			n = w2FullN
		}
		b.Run("durability="+string(d), func(b *testing.B) {
			var inject, raw, rate, cpuRate []float64
			for b.Loop() {
				w := run(b, "w2.star", string(d), n, false)
				r, rcpu := rawInserts(b, string(d), n)
				inject, raw = append(inject, w.perItem()), append(raw, r)
				rate, cpuRate = append(rate, r/w.perItem()), append(cpuRate, rcpu/w.cpuPerItem())
				b.Logf("round %d: inject %.1f µs per message (%.1f CPU), raw %.1f µs per insert (%.1f CPU), inject/raw rate %.2f (CPU %.2f)",
					len(rate), w.perItem(), w.cpuPerItem(), r, rcpu, rate[len(rate)-1], cpuRate[len(cpuRate)-1])
			}
			frames := run(b, "w2.star", string(d), walN, true)
			b.ReportMetric(median(inject), "inject-µs/msg")
			b.ReportMetric(median(raw), "raw-µs/insert")
			b.ReportMetric(median(rate), "inject/raw-rate")
			b.ReportMetric(median(cpuRate), "cpu-inject/raw-rate")
			b.ReportMetric(float64(frames.frames)/float64(frames.n), "WAL-frames/msg")
		})
	}
}
