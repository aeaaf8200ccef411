package builtins_test

import (
	"fmt"
	"runtime"
	"testing"

	"go.starlark.net/starlark"
)

// BenchmarkBytesPerMessage injects n tiny messages into one session
// (`{"role": "user", "content": "hi"}`, as a chat of short turns stores
// them) and reports the live heap they cost per message: held by the
// session store alone, then also by an agent_session_snapshot of the
// session that the script keeps.
//
//	go test ./builtins -run '^$' -bench BytesPerMessage -benchtime 1x
func BenchmarkBytesPerMessage(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			for range b.N {
				st, th := benchVM(b)
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

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
