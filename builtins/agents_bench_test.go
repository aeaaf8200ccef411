package builtins_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// boundBenchScript sets up a bound and an unbound session with the same
// model, system prompt and tool, and run(bound, calls, iterations):
// `calls` agent_loop calls of `iterations` model calls each (every reply
// but each call's last calls the tool).
const boundBenchScript = `
load("tools.star", "noop")
SYSTEM = "You are a careful assistant. Answer briefly."
a = agent("bench", model = "mock/m", system = SYSTEM, tools = ["tools.star:noop"], max_iterations = 2000)
sessions = {True: agent_session_open("bound", agent = a, max_turns = 5000), False: agent_session_open("unbound", max_turns = 5000)}

def run(bound, calls, iterations):
    s = sessions[bound]
    for c in range(calls):
        for i in range(iterations - 1):
            llm_mock(tool_calls = [{"name": "noop", "arguments": {"n": i}}])
        llm_mock(text = "done")
        if bound:
            r = agent_loop("go", session_id = s)
        else:
            r = agent_loop("go", SYSTEM, provider = "mock", model = "m", session_id = s, tools = [noop], max_iterations = 2000)
        if r["status"] != "done" or r["llm"]["iterations"] != iterations:
            fail(r["status"], r["llm"]["iterations"])
`

// BenchmarkBoundAgentLoop compares a loop on a session bound to an agent
// with the same loop on an unbound session (the same model, system
// prompt and tool given per call), side by side in one process, with the
// mock: "iterations" is one agent_loop of 1000 model calls (the cost of a
// bound iteration), "calls" 1000 agent_loop calls of one model call each
// (the per-call cost of binding: reading the session's snapshot,
// resolving the agent's tools, assembling the system prompt). It reports
// CPU µs per iteration (or per call) of each and bound/unbound, the
// figure to keep at or below 1.1.
func BenchmarkBoundAgentLoop(b *testing.B) {
	for _, shape := range []struct {
		name              string
		calls, iterations int
	}{{"iterations", 1, 1000}, {"calls", 1000, 1}} {
		b.Run(shape.name, func(b *testing.B) {
			var cost [2]float64 // unbound, bound
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "tools.star"), []byte("def noop(n = 0):\n    \"\"\"Does nothing.\"\"\"\n    return \"ok\"\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				st, err := builtins.NewState(vm.Options{Stdout: io.Discard, Root: dir})
				if err != nil {
					b.Fatal(err)
				}
				globals, err := st.ExecFile(filepath.Join(dir, "bench.star"), boundBenchScript)
				if err != nil {
					b.Fatal(vm.FormatError(err))
				}
				th := st.NewThread("bench")
				vm.SetFile(th, filepath.Join(dir, "bench.star"))
				// alternate which goes first, so neither always runs on a
				// warmer process
				order := []bool{i%2 == 0, i%2 != 0}
				for _, bound := range order {
					cpu0 := cpuTime(b)
					args := starlark.Tuple{starlark.Bool(bound), starlark.MakeInt(shape.calls), starlark.MakeInt(shape.iterations)}
					if _, err := starlark.Call(th, globals["run"], args, nil); err != nil {
						b.Fatal(vm.FormatError(err))
					}
					k := 0
					if bound {
						k = 1
					}
					cost[k] += float64((cpuTime(b) - cpu0).Nanoseconds()) / float64(shape.calls*shape.iterations) / float64(time.Microsecond)
				}
			}
			unit := "iteration"
			if shape.calls > 1 {
				unit = "call"
			}
			b.ReportMetric(cost[0]/float64(b.N), fmt.Sprintf("unbound-cpu-µs/%s", unit))
			b.ReportMetric(cost[1]/float64(b.N), fmt.Sprintf("bound-cpu-µs/%s", unit))
			b.ReportMetric(cost[1]/cost[0], "bound/unbound")
		})
	}
}
