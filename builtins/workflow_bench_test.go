package builtins_test

import (
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
)

// workflowFnScript defines run(k, times): it builds a linear workflow of
// k fn stages through workflow_graph, each stage's function reading one
// earlier output through ctx["outputs"], and runs it times times with
// workflow_execute on the in-memory store, returning the time taken.
const workflowFnScript = `
def stage(ctx):
    return ctx["outputs"].get("n0", "") + "."

def graph(k):
    nodes = {"n%d" % i: {"mode": "fn", "fn": stage} for i in range(k)}
    edges = [{"from": "n%d" % i, "to": "n%d" % (i + 1)} for i in range(k - 1)]
    return workflow_graph(name = "chain%d" % k, entry = "n0", nodes = nodes, edges = edges)

graphs = {}

def run(k, times):
    g = graphs.get(k)
    if g == None:
        g = graph(k)
        graphs[k] = g
    start = time.now()
    for _ in range(times):
        r = workflow_execute("bench", g, max_steps = k)
        if r["status"] != "completed" or len(r["steps"]) != k:
            fail(r["status"], len(r["steps"]))
    return (time.now() - start) // time.microsecond
`

// BenchmarkWorkflowFnStages runs linear workflows of fn stages through
// the Starlark path (workflow_graph, workflow_execute, the stages'
// Starlark functions) on the in-memory store, K = 10 nodes a hundred
// times and K = 1,000 nodes once, so both run 1,000 stages, alternately
// (the order swapped each round). It reports the median over rounds of
// the µs per stage of each and of their ratio within a round
// (K1000/K10: 1 is flat, each stage costing the same however many nodes
// have run), and the same of the process's CPU time per stage (the
// garbage collector's included), which a loaded machine disturbs less.
// The target is a ratio of at most 1.3 and under 20 µs a stage.
func BenchmarkWorkflowFnStages(b *testing.B) {
	st, th := benchVM(b)
	globals, err := st.ExecFile("bench.star", workflowFnScript)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	// run returns the µs of wall time and of the process's CPU time per
	// stage of times runs of the k-node workflow
	run := func(k, times int) (float64, float64) {
		cpu := cpuTime(b)
		v, err := starlark.Call(th, globals["run"], starlark.Tuple{starlark.MakeInt(k), starlark.MakeInt(times)}, nil)
		if err != nil {
			b.Fatal(vm.FormatError(err))
		}
		stages := float64(k * times)
		us, _ := starlark.AsInt32(v)
		return float64(us) / stages, float64((cpuTime(b) - cpu).Nanoseconds()) / 1000 / stages
	}
	run(10, 10) // build both graphs and warm up
	run(1000, 1)
	var small, large, ratio, cpuSmall, cpuLarge, cpuRatio []float64
	for i := 0; b.Loop(); i++ {
		var s, l, cs, cl float64
		if i%2 == 0 {
			s, cs = run(10, 100)
			l, cl = run(1000, 1)
		} else {
			l, cl = run(1000, 1)
			s, cs = run(10, 100)
		}
		small, large, ratio = append(small, s), append(large, l), append(ratio, l/s)
		cpuSmall, cpuLarge, cpuRatio = append(cpuSmall, cs), append(cpuLarge, cl), append(cpuRatio, cl/cs)
	}
	b.ReportMetric(median(small), "µs/stage-K10")
	b.ReportMetric(median(large), "µs/stage-K1000")
	b.ReportMetric(median(ratio), "K1000/K10")
	b.ReportMetric(median(cpuSmall), "cpu-µs/stage-K10")
	b.ReportMetric(median(cpuLarge), "cpu-µs/stage-K1000")
	b.ReportMetric(median(cpuRatio), "cpu-K1000/K10")
}
