package builtins_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.starlark.net/starlark"
	"google.golang.org/protobuf/proto"

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

// receiverEnv makes the test binary an OTLP/HTTP receiver process
// (TestMain) instead of running tests: BenchmarkAgentLoopTracing's
// loopback receiver, in a process of its own so that its work is not
// counted as skein's.
const receiverEnv = "SKEIN_BENCH_OTLP_RECEIVER"

func TestMain(m *testing.M) {
	if os.Getenv(receiverEnv) == "1" {
		runReceiver()
		return
	}
	os.Exit(m.Run())
}

// runReceiver serves OTLP/HTTP on a loopback port, which it prints
// first. POST /v1/traces only keeps each request's body: decoding while
// the traced loop runs would take the machine's second core from the
// loop's garbage collector and exporter, and the benchmark would measure
// the receiver. GET /spans (asked after the timed part) decodes every
// body kept since the last GET as an ExportTraceServiceRequest with the
// OTLP project's Go types and answers the number of spans they hold, or
// an error (400) when one does not decode. It returns when its standard
// input closes.
func runReceiver() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	var mu sync.Mutex
	var bodies [][]byte
	spans := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		var data []byte
		var err error
		if r.ContentLength >= 0 { // one allocation of the body's size
			data = make([]byte, r.ContentLength)
			_, err = io.ReadFull(r.Body, data)
		} else {
			data, err = io.ReadAll(r.Body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, data)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	mux.HandleFunc("GET /spans", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, data := range bodies {
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(data, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					spans += len(ss.Spans)
				}
			}
		}
		bodies = nil
		fmt.Fprint(w, spans)
	})
	fmt.Println("http://" + l.Addr().String())
	go func() { _ = http.Serve(l, mux) }()
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startReceiver starts the receiver process and returns its URL.
func startReceiver(b *testing.B) string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), receiverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("receiver: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

// receivedSpans asks the receiver how many spans it has received, all
// decoded.
func receivedSpans(b *testing.B, url string) int {
	resp, err := http.Get(url + "/spans")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(string(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("receiver: %s: %q", resp.Status, body)
	}
	return n
}

// BenchmarkAgentLoopTracing is what tracing costs the in-memory agent
// loop: each round runs a 1000-iteration mock loop without tracing (no
// OTEL_* variables: the context carries no tracer) and one with every
// span exported over OTLP/HTTP to a loopback receiver (another process,
// which keeps the requests and decodes them with the OTLP project's own
// Go types after the timed part),
// alternating which goes first, so that both see the same machine load.
// Each traced run must deliver all its spans (two per iteration: chat and
// execute_tool, and the loop's invoke_agent, less the last iteration's
// tool span) before the next run starts.
//
// It reports the median wall and process CPU time per loop iteration of
// each (the traced one including the final export, Shutdown), the
// ratios traced/untraced of the medians (the target: at most 1.10), and
// the 1-minute load average at the end.
func BenchmarkAgentLoopTracing(b *testing.B) {
	const iterations = 1000
	url := startReceiver(b)
	b.Setenv(telemetry.EnvEndpoint, url)
	var off, on, offCPU, onCPU []float64
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, traced := range order {
			var tracer *telemetry.Tracer
			before := 0
			if traced {
				tracer = telemetry.FromEnv(os.Stderr)
				before = receivedSpans(b, url)
			}
			wall, cpu := runTracedLoop(b, tracer, iterations)
			if traced {
				if got := receivedSpans(b, url) - before; got != 2*iterations {
					b.Fatalf("the receiver decoded %d spans of a traced run, want %d", got, 2*iterations)
				}
				on, onCPU = append(on, wall), append(onCPU, cpu)
			} else {
				off, offCPU = append(off, wall), append(offCPU, cpu)
			}
		}
	}
	b.ReportMetric(median(off), "off-µs/it")
	b.ReportMetric(median(on), "on-µs/it")
	b.ReportMetric(median(on)/median(off), "on/off")
	b.ReportMetric(median(offCPU), "off-cpu-µs/it")
	b.ReportMetric(median(onCPU), "on-cpu-µs/it")
	b.ReportMetric(median(onCPU)/median(offCPU), "cpu-on/off")
	b.ReportMetric(loadAverage(b), "load1")
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

// loadAverage is the machine's 1-minute load average (0 where
// /proc/loadavg does not exist).
func loadAverage(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return f
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
