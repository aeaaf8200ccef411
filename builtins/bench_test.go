package builtins_test

import (
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	starlarktime "go.starlark.net/lib/time"
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

// BenchmarkAgentLoop runs a 1,000-iteration agent_loop with the mock
// provider and one trivial Starlark tool on a named session, and reports
// the runtime's cost per iteration, and the cost of iterations 900-1000
// against iterations 1-100 (history must not make iterations slower).
// Timestamps come from a post_turn_callback, whose small cost is in every
// iteration alike. It also reports the process's CPU time (user and
// system, the garbage collector's included) per iteration of the loop
// alone, which a busy machine disturbs far less than the wall time.
func BenchmarkAgentLoop(b *testing.B) {
	const iterations = 1000
	var perIter, early, late, cpu float64
	for i := 0; i < b.N; i++ {
		st, th := benchVM(b)
		globals, err := st.ExecFile("bench.star", fmt.Sprintf(`
def noop(n = 0):
    """Does nothing."""
    return "ok"

for i in range(%d):
    llm_mock(tool_calls = [{"name": "noop", "arguments": {"n": i}}])
llm_mock(text = "done")
marks = []
s = agent_session_open("bench")
state = {}

def run():
    state["start"] = time.now()
    r = agent_loop("go", provider = "mock", session_id = s, tools = [noop], max_iterations = %d,
                   post_turn_callback = lambda info: marks.append(time.now()))
    if r["status"] != "done":
        fail(r["status"])
`, iterations-1, iterations))
		if err != nil {
			b.Fatal(vm.FormatError(err))
		}
		cpu0 := cpuTime(b)
		if _, err := starlark.Call(th, globals["run"], nil, nil); err != nil {
			b.Fatal(vm.FormatError(err))
		}
		cpu += float64((cpuTime(b) - cpu0).Nanoseconds()) / iterations / 1000
		startValue, _, _ := globals["state"].(*starlark.Dict).Get(starlark.String("start"))
		start := time.Time(startValue.(starlarktime.Time))
		list := globals["marks"].(*starlark.List)
		marks := make([]time.Time, list.Len())
		for j := range marks {
			marks[j] = time.Time(list.Index(j).(starlarktime.Time))
		}
		if len(marks) != iterations-1 { // the final text-only turn ends the loop before the callback
			b.Fatalf("%d turns ran", len(marks))
		}
		perIter += float64(marks[len(marks)-1].Sub(start).Nanoseconds()) / float64(len(marks)) / 1000
		early += float64(marks[99].Sub(marks[0]).Nanoseconds()) / 99 / 1000
		late += float64(marks[len(marks)-1].Sub(marks[len(marks)-100]).Nanoseconds()) / 99 / 1000
	}
	b.ReportMetric(perIter/float64(b.N), "µs/iteration")
	b.ReportMetric(early/float64(b.N), "µs/iter-1-100")
	b.ReportMetric(late/float64(b.N), "µs/iter-900-1000")
	b.ReportMetric(late/early, "late/early")
	b.ReportMetric(cpu/float64(b.N), "cpu-µs/iteration")
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgentLoopCompaction runs a 500-iteration mock agent_loop whose
// compact_threshold makes it compact about every 20 turns, and reports
// the total time and the number of compactions.
func BenchmarkAgentLoopCompaction(b *testing.B) {
	const iterations = 500
	var compactions, turnsPer float64
	for i := 0; i < b.N; i++ {
		st, _ := benchVM(b)
		b.StartTimer()
		globals, err := st.ExecFile("bench.star", fmt.Sprintf(`
def read(n = 0):
    """Read a page."""
    return "page %%d: " %% n + "lorem ipsum dolor sit amet " * 8

for i in range(%d):
    llm_mock(tool_calls = [{"name": "read", "arguments": {"n": i}}])
llm_mock(text = "done")
s = agent_session_open("bench")
r = agent_loop("read everything", provider = "mock", session_id = s, tools = [read], max_iterations = %d,
               compact_threshold = 1700, compaction = {"keep_last": 10, "hard_limit_tokens": 800})
if r["status"] != "done":
    fail(r["status"])
compactions = len([e for e in agent_session_snapshot(s)["events"] if e["type"] == "agent:context_compacted"])
`, iterations-1, iterations))
		b.StopTimer()
		if err != nil {
			b.Fatal(vm.FormatError(err))
		}
		n, _ := starlark.AsInt32(globals["compactions"])
		compactions += float64(n)
		turnsPer += float64(iterations) / float64(max(n, 1))
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/loop")
	b.ReportMetric(compactions/float64(b.N), "compactions")
	b.ReportMetric(turnsPer/float64(b.N), "turns/compaction")
}

// BenchmarkAgentLoopTail measures what an agent_loop takes after its last
// tool turn: the final text turn and returning the result, for loops of
// 10 and of 1,000 iterations (21 and 2,001 messages) on a new session as
// W1 runs them, alternately within
// each round. The result holds the loop's new messages as a message_list
// built only when read, so the tail must not grow with the loop: it
// reports the median over rounds of each tail (µs) and of their ratio
// within a round (`tail-1000/10`, 1 is flat), and beside them the median
// of the 8 tool turns before the tail (`turn-µs-…`): the tail is a turn
// like them, and the result adds nothing that grows.
func BenchmarkAgentLoopTail(b *testing.B) {
	st, th := benchVM(b)
	globals, err := st.ExecFile("bench.star", `
def noop(n = 0):
    """Does nothing."""
    return "ok"

def tail(n):
    for i in range(n - 1):
        llm_mock(tool_calls = [{"name": "noop", "arguments": {"n": i}}])
    llm_mock(text = "done")
    marks = []
    r = agent_loop("go", provider = "mock", session_id = agent_session_open(), tools = [noop], max_iterations = n,
                   post_turn_callback = lambda info: marks.append(time.now()))
    end = time.now()
    if r["status"] != "done" or len(marks) != n - 1:
        fail(r["status"])
    turns = sorted([(marks[i] - marks[i - 1]) // time.microsecond for i in range(len(marks) - 8, len(marks))])
    return ((end - marks[-1]) // time.microsecond, turns[len(turns) // 2])
`)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	// tail returns the tail and the median of the 8 turns before it (µs)
	tail := func(n int) (float64, float64) {
		v, err := starlark.Call(th, globals["tail"], starlark.Tuple{starlark.MakeInt(n)}, nil)
		if err != nil {
			b.Fatal(vm.FormatError(err))
		}
		us, _ := starlark.AsInt32(v.(starlark.Tuple)[0])
		turn, _ := starlark.AsInt32(v.(starlark.Tuple)[1])
		return float64(us), float64(turn)
	}
	tail(10)
	tail(1000)
	var small, large, ratio, turnSmall, turnLarge []float64
	for i := 0; b.Loop(); i++ {
		var s, l, ts, tl float64
		if i%2 == 0 {
			s, ts = tail(10)
			l, tl = tail(1000)
		} else {
			l, tl = tail(1000)
			s, ts = tail(10)
		}
		small, large, ratio = append(small, s), append(large, l), append(ratio, l/s)
		turnSmall, turnLarge = append(turnSmall, ts), append(turnLarge, tl)
	}
	b.ReportMetric(median(small), "tail-µs-10")
	b.ReportMetric(median(large), "tail-µs-1000")
	b.ReportMetric(median(ratio), "tail-1000/10")
	b.ReportMetric(median(turnSmall), "turn-µs-10")
	b.ReportMetric(median(turnLarge), "turn-µs-1000")
}
