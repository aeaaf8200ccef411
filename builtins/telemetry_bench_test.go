package builtins_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
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
// first, until its standard input closes. It stands for a collector
// that would run on another machine, so it does as little as it can
// while the traced loop runs (on this 2-core machine whatever it does
// then takes a core from the loop's garbage collector and exporter):
// POST /v1/traces only copies the body into one buffer kept from run to
// run (no allocation, no net/http server: a minimal HTTP/1.1 reader that
// still checks the method, path, Content-Type and Content-Length). GET
// /spans, asked after the timed part, decodes every body kept since the
// last GET as an ExportTraceServiceRequest with the OTLP project's Go
// types and answers the number of spans they hold, or an error (400)
// when one does not decode; it then collects its garbage and returns
// the freed memory to the system before answering, so that neither its
// collector nor its scavenger runs during the next run.
func runReceiver() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("http://" + l.Addr().String())
	r := &receiver{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// receiver is the benchmark's OTLP/HTTP receiver.
type receiver struct {
	mu     sync.Mutex
	arena  []byte      // the bodies received since the last count, one after the other
	bodies []bodyRange // where each is in arena
	spans  int
}

type bodyRange struct {
	start, end int
	gzip       bool
}

// serve answers the requests of one connection.
func (r *receiver) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		status, answer := r.request(br)
		if status == 0 {
			return // the client closed the connection
		}
		ctype := "text/plain"
		if status == http.StatusOK && answer == nil {
			ctype = "application/x-protobuf" // an empty ExportTraceServiceResponse
		}
		head := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", status, http.StatusText(status), ctype, len(answer))
		if status != http.StatusOK {
			head = append(head, "Connection: close\r\n"...)
		}
		if _, err := c.Write(append(append(head, "\r\n"...), answer...)); err != nil || status != http.StatusOK {
			return
		}
	}
}

// request reads one request and handles it: POST /v1/traces keeps the
// body, GET /spans counts the spans kept. It returns the response's
// status and body (status 0: no request, the connection was closed).
func (r *receiver) request(br *bufio.Reader) (int, []byte) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, nil
	}
	method, rest, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
	path, _, _ := strings.Cut(rest, " ")
	length, zipped, ctype := -1, false, ""
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return http.StatusBadRequest, []byte(err.Error())
		}
		k, v, _ := strings.Cut(string(bytes.TrimSpace(h)), ":")
		if k == "" {
			break
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "content-length":
			if length, err = strconv.Atoi(v); err != nil {
				return http.StatusBadRequest, []byte("bad Content-Length")
			}
		case "content-type":
			ctype = v
		case "content-encoding":
			zipped = v == "gzip"
		case "transfer-encoding":
			return http.StatusBadRequest, []byte("Transfer-Encoding " + v + " not supported")
		}
	}
	switch {
	case method == "POST" && path == "/v1/traces":
		if ctype != "application/x-protobuf" {
			return http.StatusUnsupportedMediaType, []byte(ctype)
		}
		if length < 0 {
			return http.StatusLengthRequired, nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		n := len(r.arena)
		r.arena = slices.Grow(r.arena, length)[:n+length]
		if _, err := io.ReadFull(br, r.arena[n:]); err != nil {
			r.arena = r.arena[:n]
			return http.StatusBadRequest, []byte(err.Error())
		}
		r.bodies = append(r.bodies, bodyRange{n, len(r.arena), zipped})
		return http.StatusOK, nil
	case method == "GET" && path == "/spans":
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.count(); err != nil {
			return http.StatusBadRequest, []byte(err.Error())
		}
		return http.StatusOK, strconv.AppendInt(nil, int64(r.spans), 10)
	}
	return http.StatusNotFound, nil
}

// count decodes the bodies kept and adds their spans to r.spans.
func (r *receiver) count() error {
	for _, body := range r.bodies {
		data := r.arena[body.start:body.end]
		if body.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				return err
			}
			if data, err = io.ReadAll(zr); err != nil {
				return err
			}
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return err
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans += len(ss.Spans)
			}
		}
	}
	r.arena, r.bodies = r.arena[:0], r.bodies[:0]
	debug.FreeOSMemory()
	return nil
}

// startReceiver starts the receiver process and returns its URL.
func startReceiver(b testing.TB) string {
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
func receivedSpans(b testing.TB, url string) int {
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

// TestBenchReceiver: the benchmark's receiver counts the spans skein's
// exporter sends it, plain and gzip-compressed, and fails the count when
// a body it kept does not decode; a request it cannot take is refused.
func TestBenchReceiver(t *testing.T) {
	url := startReceiver(t)
	export := func(compression string, n int) {
		t.Setenv(telemetry.EnvEndpoint, url)
		t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
		tracer := telemetry.FromEnv(os.Stderr)
		ctx, agent := telemetry.Agent(telemetry.With(context.Background(), tracer), "", "s1", "mock", "mock-model")
		for range n - 1 {
			_, tool := telemetry.Tool(ctx, "noop", "call_1")
			tool.End(nil, "")
		}
		agent.End(nil, "")
		if err := tracer.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	export("none", 3)
	export("gzip", 600) // two requests
	if got := receivedSpans(t, url); got != 603 {
		t.Fatalf("received %d spans, want 603", got)
	}
	post := func(ctype, body string) int {
		resp, err := http.Post(url+"/v1/traces", ctype, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("application/json", "{}"); code != http.StatusUnsupportedMediaType {
		t.Errorf("a JSON body: %d", code)
	}
	if code := post("application/x-protobuf", "\x0a\xff"); code != http.StatusOK { // kept: decoded when counted
		t.Fatalf("a truncated body: %d", code)
	}
	resp, err := http.Get(url + "/spans")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("counting a truncated body: %s, want 400", resp.Status)
	}
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
