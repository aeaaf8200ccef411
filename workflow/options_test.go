package workflow

import (
	"slices"
	"testing"

	"github.com/skein-dev/skein/agent"
)

// TestStageOptionsAreAgentOptions: a node's options are agent_loop's (and
// an llm node's llm_call's) rows of agent's one table, so a new option
// row reaches workflow nodes with no change here.
func TestStageOptionsAreAgentOptions(t *testing.T) {
	for mode, table := range map[Mode]*agent.Table{ModeAgent: agent.LoopOptions(), ModeLLM: agent.CallOptions()} {
		got := StageOptions(mode)
		for _, r := range table.Rows() {
			want := !r.Script && !slices.Contains(policyKeys, r.Name)
			if slices.Contains(got, r.Name) != want {
				t.Errorf("%s node: option %s passed = %v, want %v", mode, r.Name, !want, want)
			}
		}
		if len(got) == 0 {
			t.Errorf("%s node: no options", mode)
		}
	}
	if StageOptions(ModeFn) != nil {
		t.Error("fn nodes take no agent options")
	}
	_, err := Decode(map[string]any{"name": "w", "entry": "a", "nodes": map[string]any{
		"a": map[string]any{"mode": "llm", "prompt": "x", "max_iterations": int64(3)}}})
	if err == nil || err.Error() != "node 'a': option 'max_iterations' is not allowed on an llm node" {
		t.Errorf("loop option on an llm node: %v", err)
	}
}
