package builtins_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/telemetry"
	"github.com/skein-dev/skein/vm"
)

// tracedLoop is a mock agent_loop of n iterations, each a model call and
// one call of a Starlark tool: per iteration a chat and an execute_tool
// span, under one invoke_agent span.
const tracedLoop = `
def noop(n = 0):
    """Does nothing."""
    return "ok"

for i in range(%d):
    llm_mock(tool_calls = [{"name": "noop", "arguments": {"n": i}}])
llm_mock(text = "done")
s = agent_session_open()

def run():
    r = agent_loop("go", provider = "mock", session_id = s, tools = [noop], max_iterations = %d)
    if r["status"] != "done":
        fail(r["status"])
`

// BenchmarkAgentLoopTracing runs a 1000-iteration in-memory agent loop
// without tracing (no OTEL_* variables: the context carries no tracer)
// and with every span exported over OTLP/HTTP to a loopback receiver,
// alternating the two in each round so that both see the same machine
// load. It reports the wall time per loop iteration of each (the traced
// one including the final export, Shutdown), the ratio traced/untraced
// (the target: at most 1.10), the same for process CPU time, and the
// spans exported per iteration.
func BenchmarkAgentLoopTracing(b *testing.B) {
	const iterations = 1000
	var requests atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer rcv.Close()
	b.Setenv(telemetry.EnvEndpoint, rcv.URL)
	var off, on, offCPU, onCPU []float64
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, traced := range order {
			var tracer *telemetry.Tracer
			if traced {
				tracer = telemetry.FromEnv(nil)
			}
			wall, cpu := runTracedLoop(b, tracer, iterations)
			if traced {
				on, onCPU = append(on, wall), append(onCPU, cpu)
			} else {
				off, offCPU = append(off, wall), append(offCPU, cpu)
			}
		}
	}
	if requests.Load() == 0 {
		b.Fatal("nothing was exported")
	}
	b.ReportMetric(median(off), "off-µs/iteration")
	b.ReportMetric(median(on), "on-µs/iteration")
	b.ReportMetric(median(on)/median(off), "on/off")
	b.ReportMetric(median(onCPU)/median(offCPU), "cpu-on/off")
}

// runTracedLoop runs tracedLoop once with tracer (nil: none) and returns
// the wall and CPU microseconds per iteration, the final export of the
// spans included.
func runTracedLoop(b *testing.B, tracer *telemetry.Tracer, iterations int) (wall, cpu float64) {
	st, th := benchVM(b)
	globals, err := st.ExecFile("bench.star", fmt.Sprintf(tracedLoop, iterations-1, iterations))
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	end := st.Begin(telemetry.With(context.Background(), tracer))
	defer end()
	cpu0, start := cpuTime(b), time.Now()
	if _, err := starlark.Call(th, globals["run"], nil, nil); err != nil {
		b.Fatal(vm.FormatError(err))
	}
	if err := tracer.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	return float64(time.Since(start).Microseconds()) / float64(iterations), float64((cpuTime(b) - cpu0).Microseconds()) / float64(iterations)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkSpanOff is the cost tracing adds per span when it is off: a
// span helper's context lookup that finds no tracer, and the zero Span's
// methods.
func BenchmarkSpanOff(b *testing.B) {
	ctx := context.Background()
	for range 5 { // a context a few values deep, as in a loop
		ctx = context.WithValue(ctx, new(int), 1)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		cctx, span := telemetry.Tool(ctx, "noop", "call_1")
		if span.CaptureContent() {
			b.Fatal("content")
		}
		span.End(nil, "")
		_ = cctx
	}
}
