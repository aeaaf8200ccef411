package builtins_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/mcp/mcptest"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// mcpState returns a test VM whose policy is c (Root a fresh directory)
// with EVERYTHING predeclared as server-everything's argv.
func mcpState(t *testing.T, n *mcptest.Node, c workspace.Config) *vm.State {
	t.Helper()
	p := mcptest.Policy(t, c)
	argv := starlark.NewList(nil)
	for _, a := range n.Everything() {
		argv.Append(starlark.String(a))
	}
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard, Workspace: p, Builtins: starlark.StringDict{"EVERYTHING": argv}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func execMCP(t *testing.T, st *vm.State, src string) starlark.StringDict {
	t.Helper()
	end := st.Begin(context.Background())
	defer end()
	g, err := st.ExecFile("mcp.star", src)
	if err != nil {
		t.Fatal(vm.FormatError(err))
	}
	return g
}

// TestMCPAgentLoop: an agent_loop with the mock provider calls echo,
// get-sum and get-tiny-image of the real server-everything and gets their
// real results; the image is stored as an image block.
func TestMCPAgentLoop(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	execMCP(t, st, `
ev = mcp_server(command = EVERYTHING, name = "everything")
assert_eq = lambda a, b: fail("%r != %r" % (a, b)) if a != b else None
assert_eq(ev.name, "everything")
names = [t.name for t in ev.tools]
for want in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"]:
    if want not in names:
        fail("missing tool %s in %s" % (want, names))
llm_mock(tool_calls = [
    {"name": "echo", "arguments": {"message": "hello"}},
    {"name": "get-sum", "arguments": {"a": 2, "b": 3}},
    {"name": "get-tiny-image", "arguments": {}},
    {"name": "get-sum", "arguments": {"a": "two", "b": 3}},
])
llm_mock(text = "done")
r = agent_loop("use the tools", tools = ev.tools, session_id = "s")
assert_eq(r["status"], "done")
assert_eq(r["tools"]["failed"], ["get-sum"])
`)
	snap, err := st.Store.Snapshot(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	var results []message.Message
	for _, m := range snap.Messages {
		if m.Role == message.RoleTool {
			results = append(results, m)
		}
	}
	if len(results) != 4 {
		t.Fatalf("tool messages: %+v", results)
	}
	if results[0].Text != "Echo: hello" || results[1].Text != "The sum of 2 and 3 is 5." {
		t.Errorf("results: %q, %q", results[0].Text, results[1].Text)
	}
	var image bool
	for _, b := range results[2].Blocks {
		image = image || b.Type == message.BlockImage && b.MediaType == "image/png" && b.Data != ""
	}
	if !image {
		t.Errorf("get-tiny-image: no image block in %+v", results[2])
	}
	if !results[3].IsError || !strings.HasPrefix(results[3].Text, "invalid arguments for tool get-sum: arguments.a:") {
		t.Errorf("bad arguments: %+v", results[3])
	}
}

// TestMCPAgentLoopHTTP: the same over server-everything's Streamable
// HTTP mode.
func TestMCPAgentLoopHTTP(t *testing.T) {
	n := mcptest.Find(t)
	url := n.EverythingHTTP(t)
	st := mcpState(t, n, workspace.Config{AllowNet: []string{"127.0.0.1"}})
	g := execMCP(t, st, `
ev = mcp_server(url = "`+url+`")
llm_mock(tool_calls = [{"name": "echo", "arguments": {"message": "over http"}}, {"name": "get-sum", "arguments": {"a": 20, "b": 22}}])
llm_mock(text = "done")
r = agent_loop("go", tools = ev.tools)
results = [m["content"] for m in r["messages"] if m["role"] == "tool"]
`)
	got := g["results"].String()
	if want := `["Echo: over http", "The sum of 20 and 22 is 42."]`; got != want {
		t.Errorf("results %s, want %s", got, want)
	}
}

// TestMCPProgressEvents: a long-running operation's progress notifications
// are tool_progress events, logged before its result.
func TestMCPProgressEvents(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	execMCP(t, st, `
ev = mcp_server(command = EVERYTHING)
llm_mock(tool_calls = [{"name": "trigger-long-running-operation", "arguments": {"duration": 0.6, "steps": 3}}])
llm_mock(text = "done")
agent_loop("go", tools = ev.tools, session_id = "s")
`)
	snap, err := st.Store.Snapshot(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range snap.Events {
		switch e.Type {
		case "tool_progress", "tool_result":
			data, _ := json.Marshal(e.Data)
			got = append(got, e.Type+" "+string(data))
		}
	}
	want := []string{
		`tool_progress {"name":"trigger-long-running-operation","progress":1,"total":3}`,
		`tool_progress {"name":"trigger-long-running-operation","progress":2,"total":3}`,
		`tool_progress {"name":"trigger-long-running-operation","progress":3,"total":3}`,
	}
	if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(got[3], "tool_result") {
		t.Errorf("events:\n%s\nwant:\n%s\ntool_result ...", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMCPCancel: cancelling the run stops a long-running MCP tool within
// a second.
func TestMCPCancel(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	execMCP(t, st, `ev = mcp_server(command = EVERYTHING)`)
	ctx, cancel := context.WithCancel(context.Background())
	end := st.Begin(ctx)
	defer end()
	var cancelled time.Time
	time.AfterFunc(time.Second, func() { cancelled = time.Now(); cancel() })
	_, err := st.ExecFile("cancel.star", `
ev = mcp_server(command = EVERYTHING)
llm_mock(tool_calls = [{"name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30}}])
agent_loop("go", tools = ev.tools, session_id = "c")
`)
	if err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(cancelled); d > time.Second {
		t.Errorf("the run ended %v after its cancellation", d)
	}
}

// TestMCPPolicyAndSecrets: without --allow-cmd nothing starts; the
// server's environment holds only what was allowed; a secret passed in
// env never reaches the store.
func TestMCPPolicyAndSecrets(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{})
	end := st.Begin(context.Background())
	_, err := st.ExecFile("refused.star", `mcp_server(command = EVERYTHING)`)
	end()
	if err == nil || !strings.Contains(err.Error(), `mcp_server: mcp server 'node': command "node" is not allowed (no commands are allowed; use --allow-cmd)`) {
		t.Errorf("without --allow-cmd: %v", err)
	}
	end = st.Begin(context.Background())
	_, err = st.ExecFile("refused.star", `mcp_server(url = "https://mcp.example.com/mcp")`)
	end()
	if err == nil || !strings.Contains(err.Error(), "mcp.example.com") || !strings.Contains(err.Error(), "--allow-net") {
		t.Errorf("url not allowed: %v", err)
	}

	const secret = "mcp-secret-value-4711"
	t.Setenv("SKEIN_MCP_TOKEN", secret)
	t.Setenv("SKEIN_NOT_ALLOWED", "leak")
	st = mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}, AllowEnv: []string{"MCP_TOKEN", "GREETING"}})
	execMCP(t, st, `
ev = mcp_server(command = EVERYTHING, env = {"MCP_TOKEN": secret("SKEIN_MCP_TOKEN"), "GREETING": "hi"})
env = json.decode(ev.call("get-env")["text"])
names = sorted(env.keys())
if names != ["GREETING", "HOME", "MCP_TOKEN", "PATH"]:
    fail("the server's environment: %s" % names)
if env["MCP_TOKEN"] != "<secret SKEIN_MCP_TOKEN>":
    fail("the secret came back unredacted")
llm_mock(tool_calls = [{"name": "get-env", "arguments": {}}])
llm_mock(text = "done")
agent_loop("go", tools = ev.tools, session_id = "s")
`)
	snap, err := st.Store.Snapshot(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Error("the secret is in the stored session")
	}
	if !strings.Contains(string(data), `\u003csecret SKEIN_MCP_TOKEN\u003e`) {
		t.Error("the stored get-env result does not show the secret redacted")
	}
}

// TestMCPToolClash: two servers offering one tool name is an error naming
// both; prefix= renames one server's tools.
func TestMCPToolClash(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	g := execMCP(t, st, `
a = mcp_server(command = EVERYTHING, name = "a")
b = mcp_server(command = EVERYTHING, name = "b")
c = mcp_server(command = EVERYTHING, name = "c", prefix = "c_")
def clash():
    agent_loop("go", tools = a.tools + b.tools)
llm_mock(tool_calls = [{"name": "c_echo", "arguments": {"message": "prefixed"}}])
llm_mock(text = "done")
r = agent_loop("go", tools = a.tools + c.tools)
results = [m["content"] for m in r["messages"] if m["role"] == "tool"]
`)
	if got := g["results"].String(); got != `["Echo: prefixed"]` {
		t.Errorf("prefixed call: %s", got)
	}
	thread := st.NewThread("clash")
	_, err := starlark.Call(thread, g["clash"], nil, nil)
	want := `agent_loop: two tools are named "echo" (mcp server 'a' and mcp server 'b'; pass prefix= to mcp_server to rename its tools)`
	if err == nil || err.Error() != want {
		t.Errorf("clash: got %v, want %s", err, want)
	}
}

// TestScriptTools: what skein mcp serves of a script, and each call's
// limits.
func TestScriptTools(t *testing.T) {
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard}, 1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.ExecFile("served.star", `
def spin():
    """Runs for ever."""
    for i in range(1 << 40):
        pass

def greet(name):
    """Greets.

    Args:
      name (str): who.
    """
    return "hello " + name

def _hidden():
    """Not served."""

def undocumented():
    pass
`)
	if err != nil {
		t.Fatal(vm.FormatError(err))
	}
	tools, err := builtins.ScriptTools(st, g, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Spec.Name)
	}
	if strings.Join(names, " ") != "greet spin" {
		t.Fatalf("served %v", names)
	}
	out, err := tools[0].Call(context.Background(), map[string]any{"name": "you"})
	if err != nil || out != "hello you" {
		t.Errorf("greet: %q, %v", out, err)
	}
	start := time.Now()
	_, err = tools[1].Call(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "timeout: the call exceeded --timeout 300ms") {
		t.Errorf("spin: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the timed-out call took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := tools[1].Call(ctx, nil); err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Errorf("cancelled spin: %v", err)
	}
}

// TestMCPWorkflowNode: a workflow stage runs with an MCP server's tools;
// the dumped graph names them, and workflow_load takes them back by name.
func TestMCPWorkflowNode(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	g := execMCP(t, st, `
ev = mcp_server(command = EVERYTHING)
g = workflow_graph(name = "sum", entry = "add", nodes = {
    "add": {"mode": "agent", "prompt": "Add: {task}", "tools": ev.tools, "model_policy": {"provider": "mock", "session_id": "wf"}},
})
llm_mock(tool_calls = [{"name": "get-sum", "arguments": {"a": 40, "b": 2}}])
llm_mock(text = "42")
r = workflow_execute("40 and 2", g)
results = [m["content"] for m in agent_session_snapshot("wf")["messages"] if m["role"] == "tool"]
dumped = workflow_dump(g)
`)
	if got := g["results"].String(); got != `["The sum of 40 and 2 is 42."]` {
		t.Errorf("stage tool results %s", got)
	}
	dump := string(g["dumped"].(starlark.String))
	if !strings.Contains(dump, "get-sum") {
		t.Errorf("the dump does not name the MCP tools:\n%s", dump)
	}
}

// TestMCPAgentFileServers: an agent's mcp_servers start with its first
// bound turn and grant the tools its tools list names: the loop calls the
// real server-everything's echo, and the model sees only that tool.
func TestMCPAgentFileServers(t *testing.T) {
	n := mcptest.Find(t)
	st := mcpState(t, n, workspace.Config{AllowCmds: []string{"node"}})
	execMCP(t, st, `
assert_eq = lambda a, b: fail("%r != %r" % (a, b)) if a != b else None
ev = agent("ev", model = "mock/m", mcp_servers = {"ev": {"command": EVERYTHING}}, tools = ["echo"])
agent_session_open("bound", agent = ev)
llm_mock(tool_calls = [{"name": "echo", "arguments": {"message": "from an agent file"}}])
llm_mock(text = "done")
r = agent_loop("echo it", session_id = "bound")
assert_eq(r["status"], "done")
assert_eq([t["name"] for t in llm_mock_calls()[0]["tools"]], ["echo"])
`)
	snap, err := st.Store.Snapshot(context.Background(), "bound")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range snap.Messages {
		if m.Role == message.RoleTool {
			got = append(got, m.Text)
		}
	}
	if len(got) != 1 || got[0] != "Echo: from an agent file" {
		t.Errorf("tool results: %q", got)
	}
}

// TestMCPAgentFileUnknownTool: without mcp_servers an unknown tool name
// still fails when the agent is made.
func TestMCPAgentFileUnknownTool(t *testing.T) {
	st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	end := st.Begin(context.Background())
	defer end()
	_, err = st.ExecFile("x.star", `agent("a", model = "mock/m", tools = ["echo"])`)
	if err == nil || !strings.Contains(err.Error(), "unknown tool 'echo'") {
		t.Errorf("got %v", err)
	}
}
