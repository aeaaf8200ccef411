package builtins_test

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/vm"
)

// BenchmarkBytesPerMessage injects n tiny messages into one session
// (`{"role": "user", "content": "hi"}`, as a chat of short turns stores
// them) and reports the live heap they cost per message: held by the
// session store alone, then also by an agent_session_snapshot of the
// session that the script keeps.
//
// A SQLite store keeps only the live sessions' messages in memory.
//
//	go test ./builtins -run '^$' -bench BytesPerMessage -benchtime 1x
func BenchmarkBytesPerMessage(b *testing.B) {
	for _, bc := range []struct {
		store string
		n     int
	}{{"memory", 100_000}, {"memory", 1_000_000}, {"sqlite", 100_000}} {
		b.Run(fmt.Sprintf("store=%s/messages=%d", bc.store, bc.n), func(b *testing.B) {
			n := bc.n
			for range b.N {
				st, th := benchVM(b)
				if bc.store == "sqlite" {
					st, th = sqliteVM(b)
				}
				base := heapAlloc()
				execStar(b, st, fmt.Sprintf(`
s = agent_session_open("tiny")
for i in range(%d):
    agent_session_inject(s, {"role": "user", "content": "hi"})
`, n))
				live := heapAlloc()
				snap := call(b, th, st, "agent_session_snapshot", starlark.String("tiny"))
				withSnap := heapAlloc()
				b.ReportMetric(float64(live-base)/float64(n), "B/message")
				b.ReportMetric(float64(withSnap-base)/float64(n), "B/message-with-snapshot")
				runtime.KeepAlive(snap)
				runtime.KeepAlive(st)
			}
		})
	}
}

// sqliteVM is benchVM over a SQLite store in a temporary directory.
func sqliteVM(b *testing.B) (*vm.State, *starlark.Thread) {
	backend, err := sqlite.Open(filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { backend.Close() })
	store, err := sessions.NewStore(backend)
	if err != nil {
		b.Fatal(err)
	}
	st, err := builtins.NewState(vm.Options{Stdout: io.Discard, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	return st, st.NewThread("bench")
}

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
