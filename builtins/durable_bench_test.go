package builtins_test

import (
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/vm"
)

// The benchmarks of durable sessions: the builtins over a SQLite store,
// as skein run uses them.

// durableVM returns a VM over a store on the SQLite database at path; the
// benchmark's cleanup shuts it down.
func durableVM(b *testing.B, path string) (*vm.State, *starlark.Thread) {
	b.Helper()
	st, th, shutdown := openDurableVM(b, path)
	b.Cleanup(func() { shutdown() })
	return st, th
}

// openDurableVM is durableVM that leaves the shutdown to the caller.
func openDurableVM(b *testing.B, path string) (*vm.State, *starlark.Thread, func() error) {
	b.Helper()
	backend, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	store, err := sessions.NewStore(backend)
	if err != nil {
		b.Fatal(err)
	}
	st, err := builtins.NewState(vm.Options{Store: store, Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	return st, st.NewThread("bench"), store.Shutdown
}

// typicalMessage returns message i of a typical agent transcript,
// repeating every four messages: a user prompt, an assistant message
// calling a tool, the tool's result and an answer with usage.
func typicalMessage(i int) message.Message {
	id := fmt.Sprintf("call_%d", i/4)
	switch i % 4 {
	case 0:
		return message.Message{Role: message.RoleUser, Text: fmt.Sprintf("Step %d: please look at the failing test in pkg/server and tell me why it fails.", i)}
	case 1:
		return message.Message{Role: message.RoleAssistant, Text: "Let me read the test output first.",
			ToolCalls: []message.ToolCall{{ID: id, Name: "run_tests", Arguments: map[string]any{"package": "./pkg/server", "verbose": true}}}}
	case 2:
		return message.Message{Role: message.RoleTool, ToolCallID: id, Name: "run_tests",
			Text: "--- FAIL: TestHandler (0.01s)\n    handler_test.go:42: got status 500, want 200\nFAIL"}
	default:
		return message.Message{Role: message.RoleAssistant, Model: "mock-large",
			Text:  "The handler returns 500 because the request body is read twice; the second read sees EOF.",
			Usage: map[string]any{"input_tokens": int64(1200 + i), "output_tokens": int64(40)}}
	}
}

// storeSession stores session id with n typical messages through a
// store, 1,000 per write, each with the "message" event the store logs.
func storeSession(b *testing.B, path, id string, n int) {
	b.Helper()
	backend, err := sqlite.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	store, err := sessions.NewStore(backend)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Shutdown()
	if _, err := store.Open(b.Context(), id, 0); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 1000 {
		ch := &sessions.Change{}
		for j := i; j < min(n, i+1000); j++ {
			ch.Append = append(ch.Append, typicalMessage(j))
		}
		if _, err := store.Apply(b.Context(), id, ch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDurableInject appends messages with agent_session_inject from
// Starlark to a session in SQLite: each call is one transaction, on disk
// (synchronous=FULL) before it returns.
func BenchmarkDurableInject(b *testing.B) {
	st, th := durableVM(b, filepath.Join(b.TempDir(), "sessions.db"))
	globals, err := st.ExecFile("bench.star", `
s = agent_session_open("inject")
def inject(n):
    for i in range(n):
        agent_session_inject(s, {"role": "user", "content": "Step %d: please look at the failing test in pkg/server." % i})
`)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	b.ResetTimer()
	if _, err := starlark.Call(th, globals["inject"], starlark.Tuple{starlark.MakeInt(b.N)}, nil); err != nil {
		b.Fatal(vm.FormatError(err))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDurableResume100k resumes a stored session of 100,000 typical
// messages (with their 100,000 message events) as a new process would:
// open the database, make a VM, then agent_session_open and
// agent_session_length. It reports the whole time per resume.
func BenchmarkDurableResume100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "sessions.db")
	storeSession(b, path, "big", 100_000)
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		st, th, shutdown := openDurableVM(b, path)
		call(b, th, st, "agent_session_open", starlark.String("big"))
		n := call(b, th, st, "agent_session_length", starlark.String("big"))
		total += time.Since(start)
		if n != starlark.MakeInt(100_000) {
			b.Fatalf("length %v", n)
		}
		if err := shutdown(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/resume")
}

// rowCount returns the rows of the session database's tables.
func rowCount(b *testing.B, db *sql.DB) int64 {
	b.Helper()
	var n int64
	err := db.QueryRow(`SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM views) +
		(SELECT count(*) FROM writes)`).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkDurableFork forks stored sessions of 10 and 100,000 messages
// with agent_session_fork (the source is live after the first fork) and
// reports the rows each fork adds to the database (the child's row, a
// frozen view of the source, and two rows of table writes: the child's
// first, with its fork event, and the source's, with its own). The ratio
// sub-benchmark forks both in turn and reports how much longer the long
// one takes.
func BenchmarkDurableFork(b *testing.B) {
	path := filepath.Join(b.TempDir(), "sessions.db")
	sizes := []int{10, 100_000}
	for _, n := range sizes {
		storeSession(b, path, fmt.Sprint("src", n), n)
	}
	st, th := durableVM(b, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fork := func(n int) {
		call(b, th, st, "agent_session_fork", starlark.String(fmt.Sprint("src", n)))
	}
	for _, n := range sizes {
		fork(n) // loads the source
		b.Run(fmt.Sprintf("msgs=%d", n), func(b *testing.B) {
			before := rowCount(b, db)
			for b.Loop() {
				fork(n)
			}
			b.ReportMetric(float64(rowCount(b, db)-before)/float64(b.N), "rows-added/fork")
		})
	}
	b.Run("ratio", func(b *testing.B) {
		var short, long time.Duration
		for b.Loop() {
			start := time.Now()
			fork(sizes[0])
			mid := time.Now()
			fork(sizes[1])
			short, long = short+mid.Sub(start), long+time.Since(mid)
		}
		b.ReportMetric(float64(long)/float64(short), "100k/10")
	})
}

// BenchmarkDurableDiskPerMessage injects typical 1 KB user messages with
// agent_session_inject and reports the database's size per message after
// a checkpoint: each inject's row of table writes (its message and its
// message event).
func BenchmarkDurableDiskPerMessage(b *testing.B) {
	const n = 2000
	var perMsg, jsonBytes float64
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "sessions.db")
		st, _, shutdown := openDurableVM(b, path)
		execStar(b, st, `s = agent_session_open("empty")`)
		if err := shutdown(); err != nil {
			b.Fatal(err)
		}
		empty := fileSize(b, path)
		st, _, shutdown = openDurableVM(b, path)
		line := "Message %d. The quick brown fox jumps over the lazy dog; it is a typical line of prose. "
		execStar(b, st, fmt.Sprintf(`
s = agent_session_open("kb")
for i in range(%d):
    agent_session_inject(s, {"role": "user", "content": (%q %% i * 12)[:1000]})
`, n, line))
		if err := shutdown(); err != nil { // checkpoints the WAL into the file
			b.Fatal(err)
		}
		perMsg += float64(fileSize(b, path)-empty) / n
		body := fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("x", 1000))
		jsonBytes = float64(len(body))
	}
	b.ReportMetric(perMsg/float64(b.N), "disk-bytes/msg")
	b.ReportMetric(jsonBytes, "json-bytes/msg")
}

// fileSize returns the size of the database and its WAL, if any.
func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	var total int64
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err == nil {
			total += fi.Size()
		}
	}
	return total
}
