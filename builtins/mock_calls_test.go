package builtins_test

import (
	"fmt"
	"io"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// TestMockCallsLinear checks that llm_mock_calls after a loop of N turns
// allocates O(N), not O(N²): every request carries the whole history, and
// each message must be converted once, not once per request holding it.
func TestMockCallsLinear(t *testing.T) {
	allocs := func(turns int) float64 {
		st, err := builtins.NewState(vm.Options{Stdout: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf(`
def t(x):
    return "ok"
for i in range(%d):
    llm_mock(tool_calls = [{"name": "t", "arguments": {"x": i}}])
llm_mock(text = "done")
agent_loop("go", provider = "mock", tools = [t], max_iterations = %d, compaction = "none")
`, turns, turns+1)
		if _, err := st.ExecFile("loop.star", src); err != nil {
			t.Fatal(vm.FormatError(err))
		}
		th := st.NewThread("calls")
		fn := st.Predeclared()["llm_mock_calls"]
		return testing.AllocsPerRun(3, func() {
			if _, err := starlark.Call(th, fn, nil, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(100), allocs(400)
	// Linear: 4x the turns, about 4x the allocations; quadratic would be 16x.
	if ratio := large / small; ratio > 6 {
		t.Errorf("llm_mock_calls allocates %.0f after 100 turns and %.0f after 400 (x%.1f): not linear", small, large, ratio)
	}
}
