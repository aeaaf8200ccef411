package builtins

import (
	"slices"
	"testing"

	"github.com/skein-dev/skein/workflow"
)

// TestWorkflowStageOptions keeps the node options of workflows in step
// with agent_loop's and llm_call's: every option a node passes through is
// one of theirs, and every option of theirs is either passed through,
// set elsewhere in the node, or deliberately left out.
func TestWorkflowStageOptions(t *testing.T) {
	elsewhere := []string{"session_id", "tools", "provider", "model", "base_url", "api_version", "temperature", "max_tokens"}
	leftOut := map[string]string{
		"post_turn_callback": "a function: nodes are data, written to files",
		"compress_callback":  "a function: nodes are data, written to files",
		"workspace":          "a policy value of the script, not data",
	}
	for _, tc := range []struct {
		mode  workflow.Mode
		table *optionTable
	}{{workflow.ModeAgent, loopTable()}, {workflow.ModeLLM, callTable()}} {
		passed := workflow.StageOptions(tc.mode)
		for _, k := range passed {
			if tc.table.row(k) == nil {
				t.Errorf("%s nodes pass option %q, which %s does not have", tc.mode, k, tc.table.Title)
			}
		}
		for _, k := range tc.table.names() {
			if !slices.Contains(passed, k) && !slices.Contains(elsewhere, k) && leftOut[k] == "" {
				t.Errorf("%s option %q is neither a %s node option nor deliberately left out", tc.table.Title, k, tc.mode)
			}
		}
	}
}
