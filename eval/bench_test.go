package eval_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/eval/evalfile"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/vm"
)

// BenchmarkCaseOverhead measures what the runner adds per case: 1,000
// cases a round, a task that returns a value of its case (trivial) or
// makes one llm_call to the mock (mock_llm), and one built-in scorer,
// one case at a time. ns/case is the figure to read (the target: under
// 200 µs for the trivial task).
func BenchmarkCaseOverhead(b *testing.B) {
	for _, task := range []struct{ name, body string }{
		{"trivial", `return case["q"]`},
		{"mock_llm", `return llm_call(case["q"], provider = "mock")["text"]`},
	} {
		b.Run(task.name, func(b *testing.B) {
			_, s := suite(b, `
DATASET = [{"id": i, "q": "question %d" % i, "expected": "question %d" % i} for i in range(1000)]
def task(case):
    `+task.body+`
score_exact = exact()
`)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := eval.Run(context.Background(), s, eval.Options{ID: fmt.Sprintf("run%d", i), Parallel: 1}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/case")
		})
	}
}

// BenchmarkMockCallDirect is BenchmarkCaseOverhead/mock_llm's model call
// without the runner: the same llm_call to the mock on a session of its
// own per case, 1,000 a round, in a plain Starlark loop. The difference
// between the two ns/case is what the runner adds to such a task.
func BenchmarkMockCallDirect(b *testing.B) {
	st, _ := suite(b, `
DATASET = [{"id": 0}]
def task(case):
    return None
score_x = exact(key = "id")
`)
	thread := st.NewThread("bench")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := fmt.Sprintf(`
for i in range(1000):
    llm_call("question %%d" %% i, provider = "mock", session_id = "direct%d-%%d" %% i)["text"] == "question %%d" %% i
`, i)
		if _, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true}, thread, "direct.star", src, st.Predeclared()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/case")
}

// slowModel is a loopback OpenAI Chat Completions server that answers
// every request after delay.
func slowModel(delay time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
}

// BenchmarkParallelSlowModel runs 16 cases whose task waits on a loopback
// model that takes 20 ms to answer, with -p 1 and -p 8 side by side in
// each round; speedup is p8's throughput over p1's (the target: at least
// 1.7 on two cores).
func BenchmarkParallelSlowModel(b *testing.B) {
	srv := slowModel(20 * time.Millisecond)
	defer srv.Close()
	env := map[string]string{"OPENAI_API_KEY": "sk-bench"}
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard, LLM: providers.Default(func(k string) string { return env[k] })}, 1)
	if err != nil {
		b.Fatal(err)
	}
	st.Begin(context.Background())
	globals, err := st.ExecFile("e.star", `
DATASET = [{"q": "question %d" % i, "expected": "ok"} for i in range(16)]
def task(case):
    return llm_call(case["q"], provider = "openai", base_url = "`+srv.URL+`/v1", model = "m", stream = False)["text"]
score_exact = exact()
`)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	var p1, p8 time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range []int{1, 8} {
			id := fmt.Sprintf("run%d-p%d", i, p)
			s, err := evalfile.NewStarlarkSuite(evalfile.StarlarkConfig{State: st, Globals: globals, RunID: id})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			rec, err := eval.Run(context.Background(), s, eval.Options{ID: id, Parallel: p})
			elapsed := time.Since(start)
			s.Close()
			if err != nil {
				b.Fatal(err)
			}
			if c, _ := rec.Cell("default", "exact"); c.PassRate != 1 {
				b.Fatalf("-p %d: pass rate %v", p, c.PassRate)
			}
			if p == 1 {
				p1 += elapsed
			} else {
				p8 += elapsed
			}
		}
	}
	b.ReportMetric(16*float64(b.N)/p1.Seconds(), "cases/s-p1")
	b.ReportMetric(16*float64(b.N)/p8.Seconds(), "cases/s-p8")
	b.ReportMetric(p1.Seconds()/p8.Seconds(), "speedup")
}
