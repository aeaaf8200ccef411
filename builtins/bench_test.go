package builtins_test

import (
	"fmt"
	"io"
	"runtime"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// benchVM returns a VM and a thread for calling builtins from Go.
func benchVM(b *testing.B) (*vm.State, *starlark.Thread) {
	b.Helper()
	st, err := builtins.NewState(vm.Options{Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	return st, st.NewThread("bench")
}

func call(b *testing.B, th *starlark.Thread, st *vm.State, name string, args ...starlark.Value) starlark.Value {
	v, err := starlark.Call(th, st.Predeclared()[name], args, nil)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// execStar runs a snippet on the VM.
func execStar(b *testing.B, st *vm.State, src string) {
	b.Helper()
	if _, err := st.ExecFile("bench.star", src); err != nil {
		b.Fatal(vm.FormatError(err))
	}
}

// BenchmarkFork forks sessions of 10 and 100,000 messages: the cost must
// not depend on the length (structural sharing). Compare the two ns/op.
func BenchmarkFork(b *testing.B) {
	for _, n := range []int{10, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			st, th := benchVM(b)
			execStar(b, st, fmt.Sprintf(`
s = agent_session_open("src")
for i in range(%d):
    agent_session_inject(s, {"role": "user", "content": "message number %%d" %% i})
`, n))
			src := starlark.String("src")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				call(b, th, st, "agent_session_fork", src)
			}
		})
	}
}

// BenchmarkInject builds a session by agent_session_inject from Starlark;
// ns/op is per message. Linear growth keeps the per-message cost flat
// between 10,000 and 100,000 messages.
func BenchmarkInject(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			src := fmt.Sprintf(`
s = agent_session_open()
for i in range(%d):
    agent_session_inject(s, {"role": "user", "content": "message"})
`, n)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				st, _ := benchVM(b)
				execStar(b, st, src)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/message")
		})
	}
}

// BenchmarkOpenMillion opens 1,000,000 distinct sessions with the default
// cap (128) and reports the heap in use after the first 10,000 and at the
// end; the LRU keeps their ratio near 1.
func BenchmarkOpenMillion(b *testing.B) {
	for i := 0; i < b.N; i++ {
		st, _ := benchVM(b)
		execStar(b, st, `
for i in range(10000):
    agent_session_open()
`)
		first := heapInUse()
		execStar(b, st, `
for i in range(990000):
    agent_session_open()
`)
		last := heapInUse()
		b.ReportMetric(float64(first)/(1<<20), "MiB-after-10k")
		b.ReportMetric(float64(last)/(1<<20), "MiB-after-1M")
		b.ReportMetric(float64(last)/float64(first), "heap-ratio")
		runtime.KeepAlive(st)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkSnapshot converts a 10,000-message session to its snapshot dict.
func BenchmarkSnapshot(b *testing.B) {
	st, th := benchVM(b)
	execStar(b, st, `
s = agent_session_open("big")
for i in range(5000):
    agent_session_inject(s, {"role": "user", "content": "question %d" % i, "metadata": {"i": i}})
    agent_session_inject(s, {"role": "assistant", "content": "answer %d" % i})
`)
	id := starlark.String("big")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call(b, th, st, "agent_session_snapshot", id)
	}
}
