package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// loopbackOpenAI is an OpenAI-compatible chat completions server on the
// loopback interface answering W1's requests: a call of noop to each of
// the first n-1, text to the n'th. It records the time its handler spent
// on each request (reading the body included).
type loopbackOpenAI struct {
	*httptest.Server
	n       int
	mu      sync.Mutex
	handled []time.Duration
}

func newLoopbackOpenAI(n int) *loopbackOpenAI {
	s := &loopbackOpenAI{n: n}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *loopbackOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	i := len(s.handled)
	s.handled = append(s.handled, 0)
	s.mu.Unlock()
	message := fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"noop","arguments":"{\"n\":%d}"}}]}`, i, i)
	finish := "tool_calls"
	if i == s.n-1 {
		message, finish = `{"role":"assistant","content":"done"}`, "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, i, message, finish)
	s.mu.Lock()
	s.handled[i] = time.Since(start)
	s.mu.Unlock()
}

// w1HTTPRuns is how many times each round of BenchmarkW1HTTP runs W1.
// Within one run, the median cost of 50 consecutive iterations (about
// 8 ms) jumps between about 100 and 220 µs and back, with the garbage
// collector off as well (GOGC=off): each 10% window falls in either, so
// one run's ratio ranges from 0.6 to 2.4 whatever the code does, and with
// one run a round the median of five moved between 0.85 and 1.38 over
// twelve benchmark runs of the same code. Three runs a round make
// -benchtime 5x a median of 15.
const w1HTTPRuns = 3

// BenchmarkW1HTTP runs W1 (N = 1000) over the in-memory store against a
// loopback OpenAI-compatible server, w1HTTPRuns times a round, and
// reports the cost outside the server per iteration (the iteration's
// time less the server handler's) over the first 10% of the iterations
// (after 5 that warm up) and the last 10%, and their ratio: a request
// that re-encoded the whole transcript would grow with it. Each window's
// cost is the median of its iterations' (a mean lets a few iterations
// that waited for a CPU, on a shared machine, swing the ratio from 0.2
// to 3.6 between runs); the ratio of the means is reported too
// (mean-last/first). Every figure is the median over all the runs.
func BenchmarkW1HTTP(b *testing.B) {
	var early, late, ratio, meanRatio []float64
	for b.Loop() {
		for range w1HTTPRuns {
			e, l, m := runW1HTTP(b)
			early, late, ratio, meanRatio = append(early, e), append(late, l), append(ratio, l/e), append(meanRatio, m)
			b.Logf("run %d: outside the server, median %.0f µs per iteration over the first 10%%, %.0f over the last: last/first %.2f (of the means %.2f)",
				len(ratio), e, l, l/e, m)
		}
	}
	b.ReportMetric(median(early), "outside-µs/iter-first10%")
	b.ReportMetric(median(late), "outside-µs/iter-last10%")
	b.ReportMetric(median(ratio), "last/first")
	b.ReportMetric(median(meanRatio), "mean-last/first")
}

// runW1HTTP runs W1 once against a new loopback server and returns the
// median cost outside the server, in µs per iteration, of the first 10%
// of the iterations (after 5 that warm up) and of the last 10%, and the
// ratio of the two windows' means.
func runW1HTTP(b *testing.B) (first, last, meanRatio float64) {
	b.Helper()
	srv := newLoopbackOpenAI(w1N)
	defer srv.Close()
	b.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	b.Setenv("OPENAI_API_KEY", "loopback-test-key")
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		b.Fatal(err)
	}
	settings := builtins.DefaultLLM(os.Getenv)
	settings.Model = "loopback-model"
	st, err := builtins.NewState(vm.Options{Store: store, Args: []string{strconv.Itoa(w1N), "openai"}, Stdout: discard{},
		LLM: settings})
	if err != nil {
		b.Fatal(err)
	}
	res := exec(b, st, "w1.star")
	srv.Close()
	if len(srv.handled) != w1N {
		b.Fatalf("%d requests, want %d", len(srv.handled), w1N)
	}
	// marks[k] ends iteration k+1, whose request was handled[k].
	outside := make([]time.Duration, len(res.marks))
	prev := res.start
	for k, m := range res.marks {
		outside[k] = m.Sub(prev) - srv.handled[k]
		prev = m
	}
	// The first iterations open the connection and warm up: skip 5.
	k := len(outside) / 10
	early, late := outside[5:5+k], outside[len(outside)-k:]
	return medianOver(early), medianOver(late), meanOver(late) / meanOver(early)
}

// medianOver returns the median of ds in µs.
func medianOver(ds []time.Duration) float64 {
	us := make([]float64, len(ds))
	for i, d := range ds {
		us[i] = float64(d.Nanoseconds()) / 1000
	}
	return median(us)
}

// meanOver returns the mean of ds in µs.
func meanOver(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / float64(len(ds))
}
