package builtins

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/skein-dev/skein/mcp/mcptest"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// TestMCPServerTools: an agent's mcp_servers grant all their tools unless
// its tools list names some; each server starts once for the run.
func TestMCPServerTools(t *testing.T) {
	n := mcptest.Find(t)
	st, err := NewTestState(vm.Options{Stdout: io.Discard, Workspace: mcptest.Policy(t, workspace.Config{AllowCmds: []string{"node"}})}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	end := st.Begin(context.Background())
	defer end()
	thread := st.NewThread("agent")
	argv := []any{}
	for _, a := range n.Everything() {
		argv = append(argv, a)
	}
	servers := map[string]any{"ev": map[string]any{"command": argv, "prefix": "ev_"}}
	all, rest, err := mcpServerTools(thread, "helper", servers, []string{"read_file"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range all {
		names = append(names, tool.ToolSpec().Name)
	}
	if !slices.Contains(names, "ev_echo") || !slices.Contains(names, "ev_get-sum") || !slices.Equal(rest, []string{"read_file"}) {
		t.Errorf("no MCP tool named: got %v, rest %v", names, rest)
	}
	picked, rest, err := mcpServerTools(thread, "helper", servers, []string{"ev_echo", "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	if len(picked) != 1 || picked[0].ToolSpec().Name != "ev_echo" || !slices.Equal(rest, []string{"read_file"}) {
		t.Errorf("ev_echo named: got %v, rest %v", picked, rest)
	}
	if picked[0].(*mcpToolValue).t.Server() != all[0].(*mcpToolValue).t.Server() {
		t.Error("the server was started twice for one run")
	}
	if _, _, err := mcpServerTools(thread, "helper", map[string]any{"x": map[string]any{"comand": argv}}, nil); err == nil || err.Error() != "mcp server 'x': unknown key 'comand' (did you mean 'command'?); the keys are command, env, headers, prefix, timeout_s, url" {
		t.Errorf("a misspelt key: %v", err)
	}
}
