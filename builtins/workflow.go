package builtins

// Workflow builtins (docs/workflows.md).
//
//	workflow_graph(name, entry, nodes, edges=None, metadata=None, agents=None) -> workflow_graph
//	workflow_execute(task, graph, max_steps=50, run_id=None, vars=None, on_event=None) -> dict
//	workflow_load(path, tools=None, agents=None) -> workflow_graph
//	workflow_dump(graph) -> str

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workflow"
)

func workflowSpecs() []Spec {
	const area = "Workflows"
	return []Spec{
		{"workflow_graph", "(name, entry, nodes, edges=None, metadata=None, agents=None) -> workflow_graph",
			"Build and validate a workflow graph: nodes by name, edges with expr-lang `when` conditions, agents the nodes' agent_ref names (docs/workflows.md).", area, workflowGraph},
		{"workflow_execute", "(task, graph, max_steps=50, run_id=None, vars=None, on_event=None) -> dict",
			"Run or resume a workflow: {status, run_id, output, outputs, vars, steps, error?}.", area, workflowExecute},
		{"workflow_load", "(path, tools=None, agents=None) -> workflow_graph",
			"Read a YAML workflow file; tools by built-in name or from tools={name: fn}, fn stages as file.star:function, agents beside the file's own agents: list.", area, workflowLoad},
		{"workflow_dump", "(graph) -> str",
			"The graph as a workflow file: keys sorted, byte-stable.", area, workflowDump},
	}
}

// Graph is a workflow graph as a Starlark value: the validated graph and
// the Starlark values its stages call (tools and fn functions).
type Graph struct {
	g     *workflow.Graph
	tools map[string]*starlark.List    // node -> its tools, for agent_loop
	fns   map[string]starlark.Callable // node -> fn of an fn stage
}

var _ starlark.HasAttrs = (*Graph)(nil)

func (g *Graph) String() string        { return fmt.Sprintf("<workflow_graph %s>", g.g.Name) }
func (g *Graph) Type() string          { return "workflow_graph" }
func (g *Graph) Freeze()               {}
func (g *Graph) Truth() starlark.Bool  { return true }
func (g *Graph) Hash() (uint32, error) { return starlark.String(g.g.Fingerprint()).Hash() }

// Attr returns name, entry, nodes (sorted names) or fingerprint.
func (g *Graph) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(g.g.Name), nil
	case "entry":
		return starlark.String(g.g.Entry), nil
	case "fingerprint":
		return starlark.String(g.g.Fingerprint()), nil
	case "nodes":
		return vm.ToStarlark(append([]string{}, g.g.Order...)), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (g *Graph) AttrNames() []string { return []string{"entry", "fingerprint", "name", "nodes"} }

func workflowGraph(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name, entry string
	var nodes *starlark.Dict
	var edges, metadata, agentsV starlark.Value = starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "entry", &entry, "nodes", &nodes, "edges?", &edges, "metadata?", &metadata, "agents?", &agentsV); err != nil {
		return nil, err
	}
	agents, err := agentsArg(b.Name(), agentsV)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{"name": name, "entry": entry}
	g := &Graph{tools: map[string]*starlark.List{}, fns: map[string]starlark.Callable{}}
	specNodes := map[string]any{}
	for _, item := range nodes.Items() {
		key, ok := item[0].(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: node names must be strings, got %s", b.Name(), item[0].Type())
		}
		node, err := g.starlarkNode(b.Name(), string(key), item[1])
		if err != nil {
			return nil, err
		}
		specNodes[string(key)] = node
	}
	spec["nodes"] = specNodes
	if len(agents) > 0 {
		spec["agents"] = agentSnapshots(agents)
	}
	for key, v := range map[string]starlark.Value{"edges": edges, "metadata": metadata} {
		if v == starlark.None {
			continue
		}
		x, err := vm.FromStarlark(v, key)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		spec[key] = x
	}
	wg, err := workflow.Decode(spec)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if err := checkGraphAgents(st, wg); err != nil {
		return nil, fail(b.Name(), err)
	}
	g.g = wg
	return g, nil
}

// starlarkNode converts one node dict to its specification, keeping its
// tools and fn aside: the specification names them.
func (g *Graph) starlarkNode(fn, name string, v starlark.Value) (map[string]any, error) {
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("%s: node '%s': got %s, want dict", fn, name, v.Type())
	}
	rest := starlark.NewDict(d.Len())
	var tools, fnValue starlark.Value
	for _, item := range d.Items() {
		switch item[0] {
		case starlark.String("tools"):
			tools = item[1]
		case starlark.String("fn"):
			fnValue = item[1]
		default:
			_ = rest.SetKey(item[0], item[1])
		}
	}
	x, err := vm.FromStarlark(rest, "node '"+name+"'")
	if err != nil {
		return nil, fail(fn, err)
	}
	node := x.(map[string]any)
	where := fmt.Sprintf("%s: node '%s'", fn, name)
	if tools != nil {
		list, names, err := resolveTools(where, tools, nil)
		if err != nil {
			return nil, err
		}
		g.tools[name] = list
		node["tools"] = names
	}
	if fnValue != nil {
		c, ok := fnValue.(starlark.Callable)
		if !ok {
			return nil, fmt.Errorf("%s: 'fn': got %s, want a function", where, fnValue.Type())
		}
		if err := vm.CheckArity(c, "ctx"); err != nil {
			return nil, fmt.Errorf("%s: 'fn': %w", where, err)
		}
		g.fns[name] = c
		node["fn"] = fnReference(c)
	}
	return node, nil
}

// fnReference names a function as a workflow file does: file.star:name.
func fnReference(c starlark.Callable) string {
	if f, ok := c.(*starlark.Function); ok {
		return filepath.ToSlash(f.Position().Filename()) + ":" + f.Name()
	}
	return c.Name()
}

// resolveTools turns a node's tools (functions, tool values, or names of
// built-in tools or of functions in named) into the list agent_loop
// takes and the names the specification records.
func resolveTools(where string, v starlark.Value, named map[string]starlark.Value) (*starlark.List, []any, error) {
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !ok {
		return nil, nil, fmt.Errorf("%s: 'tools': got %s, want a list of tools", where, v.Type())
	}
	values := make([]starlark.Value, seq.Len())
	for i := range values {
		x := seq.Index(i)
		if s, isStr := x.(starlark.String); isStr {
			t, err := toolByName(string(s), named)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: tools[%d]: %v", where, i, err)
			}
			x = t
		}
		values[i] = x
	}
	list := starlark.NewList(values)
	tools, err := toolsFromStarlark(where, list)
	if err != nil {
		return nil, nil, err
	}
	names := make([]any, len(tools))
	for i, t := range tools {
		names[i] = t.ToolSpec().Name
	}
	return list, names, nil
}

// toolByName finds a tool by name: in named (workflow_load's tools=),
// then among the built-in tools.
func toolByName(name string, named map[string]starlark.Value) (starlark.Value, error) {
	if t, ok := named[name]; ok {
		return t, nil
	}
	var known []string
	for _, t := range builtinTools() {
		if t.name == name {
			return t, nil
		}
		known = append(known, t.name)
	}
	for k := range named {
		known = append(known, k)
	}
	sort.Strings(known)
	return nil, fmt.Errorf("unknown tool '%s' (known: %s; pass other functions in tools={name: fn})", name, strings.Join(known, ", "))
}

func workflowDump(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var g *Graph
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "graph", &g); err != nil {
		return nil, err
	}
	return starlark.String(workflow.Dump(g.g)), nil
}

func workflowLoad(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var tools *starlark.Dict
	var agentsV starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "tools??", &tools, "agents?", &agentsV); err != nil {
		return nil, err
	}
	agents, err := agentsArg(b.Name(), agentsV)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("%s: 'path' must not be empty", b.Name())
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	named := map[string]starlark.Value{}
	if tools != nil {
		for _, item := range tools.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: tools keys must be tool names, got %s", b.Name(), item[0].Type())
			}
			named[string(k)] = item[1]
		}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(vm.Dir(thread), path)
	}
	// like load(), a workflow file must be inside the script directory
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	if rel, err := filepath.Rel(st.Root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s: %q escapes the script directory %s", b.Name(), path, st.Root)
	}
	g, err := LoadGraph(st, path, named, agents...)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return g, nil
}

// LoadGraph reads a workflow file: tools by name from named or the
// built-in tools, fn stages by loading "file.star:function" relative to
// the file's directory through the VM's module cache. `skein run
// flow.yaml` uses it.
func LoadGraph(st *vm.State, path string, named map[string]starlark.Value, agents ...*agent.Definition) (*Graph, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wg, err := workflow.ParseWith(data, agentSnapshots(agents))
	if err == nil {
		err = checkGraphAgents(st, wg)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	g := &Graph{g: wg, tools: map[string]*starlark.List{}, fns: map[string]starlark.Callable{}}
	for _, name := range wg.Order {
		n := wg.Nodes[name]
		where := fmt.Sprintf("%s: node '%s'", path, name)
		if len(n.Tools) > 0 {
			list, _, err := resolveTools(where, vm.ToStarlark(n.Tools), named)
			if err != nil {
				return nil, err
			}
			g.tools[name] = list
		}
		if n.Mode == workflow.ModeFn {
			c, err := loadFn(st, path, n.Fn, "ctx")
			if err != nil {
				return nil, fmt.Errorf("%s: fn: %v", where, err)
			}
			g.fns[name] = c
		}
	}
	return g, nil
}

// ModuleTools loads the Starlark module file (relative to from's
// directory, as load() paths are) and returns its top-level functions by
// name, those not starting with '_': the tools a workflow file's nodes
// may name (skein run FLOW.yaml --tools FILE).
func ModuleTools(st *vm.State, from, file string) (map[string]starlark.Value, error) {
	t := st.NewThread("tools " + file)
	defer st.Release(t)
	vm.SetFile(t, from)
	globals, err := t.Load(t, file)
	if err != nil {
		return nil, err
	}
	out := map[string]starlark.Value{}
	for name, v := range globals {
		if fn, ok := v.(*starlark.Function); ok && !strings.HasPrefix(name, "_") {
			out[name] = fn
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s defines no top-level function", file)
	}
	return out, nil
}

// agentsArg reads an agents= argument: a list of agent values.
func agentsArg(fn string, v starlark.Value) ([]*agent.Definition, error) {
	if v == starlark.None {
		return nil, nil
	}
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !ok {
		return nil, fmt.Errorf("%s: for parameter agents: got %s, want a list of agents", fn, v.Type())
	}
	out := make([]*agent.Definition, seq.Len())
	for i := range out {
		a, ok := seq.Index(i).(*Agent)
		if !ok {
			return nil, fmt.Errorf("%s: agents[%d]: got %s, want agent (agent_load, agent)", fn, i, seq.Index(i).Type())
		}
		out[i] = a.def
	}
	return out, nil
}

// agentSnapshots are the frozen snapshots of agents, as a graph's agents:
// list holds them.
func agentSnapshots(agents []*agent.Definition) []any {
	out := make([]any, len(agents))
	for i, d := range agents {
		out[i] = d.Snapshot()
	}
	return out
}

// checkGraphAgents resolves the tools of a graph's agents, so an unknown
// one fails when the graph is built.
func checkGraphAgents(st *vm.State, g *workflow.Graph) error {
	for _, name := range slices.Sorted(maps.Keys(g.Agents)) {
		if err := checkAgentTools(st, g.Agents[name]); err != nil {
			return fmt.Errorf("agent '%s': %w", name, err)
		}
	}
	return nil
}

// loadFn loads "file.star:function", the file relative to from's
// directory; a function that cannot take params is refused.
func loadFn(st *vm.State, from, ref string, params ...string) (starlark.Callable, error) {
	file, name, ok := strings.Cut(ref, ":")
	if !ok || file == "" || name == "" {
		return nil, fmt.Errorf("'%s' is not file.star:function", ref)
	}
	t := st.NewThread("workflow_load " + from)
	defer st.Release(t)
	vm.SetFile(t, from)
	globals, err := t.Load(t, file)
	if err != nil {
		return nil, err
	}
	c, ok := globals[name].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s defines no function '%s'", file, name)
	}
	if err := vm.CheckArity(c, params...); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return c, nil
}

func workflowExecute(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var task string
	var g *Graph
	maxSteps := workflow.DefaultMaxSteps
	var runID, vars, onEvent starlark.Value = starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "task", &task, "graph", &g, "max_steps?", &maxSteps,
		"run_id?", &runID, "vars?", &vars, "on_event?", &onEvent); err != nil {
		return nil, err
	}
	if maxSteps < 1 {
		return nil, fmt.Errorf("%s: 'max_steps' must be >= 1", b.Name())
	}
	id, _, err := optionalID(b.Name(), "run_id", runID)
	if err != nil {
		return nil, err
	}
	var initial map[string]any
	switch v := vars.(type) {
	case starlark.NoneType:
	case *starlark.Dict:
		x, err := vm.FromStarlark(v, "vars")
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		initial = x.(map[string]any)
	default:
		return nil, fmt.Errorf("%s: for parameter vars: got %s, want dict or None", b.Name(), vars.Type())
	}
	var observe starlark.Callable
	if onEvent != starlark.None {
		c, ok := onEvent.(starlark.Callable)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter on_event: got %s, want a function or None", b.Name(), onEvent.Type())
		}
		if err := vm.CheckArity(c, "event"); err != nil {
			return nil, fmt.Errorf("%s: on_event: %w", b.Name(), err)
		}
		observe = c
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	run, err := executeGraph(thread, st, g, task, id, initial, maxSteps, observe)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return runToStarlark(run), nil
}

// runToStarlark is vm.ToStarlark(r.Map()), with the steps' dicts built
// directly: a run's result has a dict per stage.
func runToStarlark(r *workflow.Run) starlark.Value {
	steps := make([]starlark.Value, len(r.Steps))
	for i := range r.Steps {
		// 7 keys, 8 with an error, which fit the dict's own bucket: a
		// hint of 8 would allocate a second table beside it
		d := starlark.NewDict(7)
		r.Steps[i].Fields(func(k string, v any) { _ = d.SetKey(starlark.String(k), vm.ToStarlark(v)) })
		steps[i] = d
	}
	return vm.ToStarlark(r.MapWith(starlark.NewList(steps)))
}

// executeGraph runs g on thread; `skein run flow.yaml` calls it too.
func executeGraph(thread *starlark.Thread, st *vm.State, g *Graph, task, runID string, vars map[string]any, maxSteps int, observe starlark.Callable) (*workflow.Run, error) {
	opts := workflow.Options{Graph: g.g, Task: task, RunID: runID, Vars: vars, MaxSteps: maxSteps,
		Executor: &stageExecutor{thread: thread, graph: g}, Store: st.Store, Clock: st.Clock, NewID: st.NewID}
	if observe != nil {
		opts.OnEvent = func(e *workflow.Event) error {
			d := e.Data()
			d["type"], d["session_id"] = e.Type, e.SessionID
			_, err := starlark.Call(thread, observe, starlark.Tuple{vm.ToStarlark(d)}, nil)
			return err
		}
	}
	return workflow.Execute(vm.ContextOf(thread), opts)
}

// ExecuteGraph runs a graph loaded by LoadGraph on thread, for `skein run
// flow.yaml`: the run's result as workflow_execute returns it.
func ExecuteGraph(thread *starlark.Thread, g *Graph, task, runID string, maxSteps int) (*workflow.Run, error) {
	st, err := vm.StateOf(thread)
	if err != nil {
		return nil, err
	}
	return executeGraph(thread, st, g, task, runID, nil, maxSteps, nil)
}

// stageExecutor runs agent and llm stages straight through runLoop and
// runCall (agent.Run and agent.Call), so a stage behaves exactly as the
// agent_loop or llm_call a script would write, and fn stages by calling
// their function.
type stageExecutor struct {
	thread *starlark.Thread
	graph  *Graph
}

// RunStage runs one stage on the executor's thread.
func (x *stageExecutor) RunStage(ctx context.Context, s *workflow.Stage) (*workflow.StageResult, error) {
	// the stage's context (its span, when tracing) is the thread's while
	// it runs
	restore := vm.WithContext(x.thread, ctx)
	defer restore()
	n := s.Node
	if n.Mode == workflow.ModeFn {
		return x.fn(s)
	}
	o, err := stageOptions(x.graph, n, s.SessionID)
	if err != nil {
		return nil, err
	}
	if n.AgentRef != "" {
		// the node runs its agent, bound to the stage's session
		st, err := stateOf(x.thread, "workflow stage")
		if err != nil {
			return nil, err
		}
		if err := openBound(x.thread, st, "agent_session_open", s.SessionID, x.graph.g.Agents[n.AgentRef], nil, sessions.OpenOptions{}); err != nil {
			return nil, err
		}
	}
	var system starlark.Value = starlark.None
	if n.System != "" {
		system = starlark.String(n.System)
	}
	if n.Mode == workflow.ModeAgent {
		res, err := runLoop(x.thread, s.Prompt, system, o)
		if err != nil {
			return nil, err
		}
		return stageResult(n, res.Result, res.VisibleText, string(res.Status), res.Usage)
	}
	resp, res, err := runCall(x.thread, s.Prompt, system, o)
	if err != nil {
		return nil, err
	}
	return stageResult(n, res, resp.Text, "", resp.Usage)
}

// stageResult is a stage's result: the reply's text, or with an
// output_schema the parsed value as compact JSON (the reply's text may
// have had a code fence around it).
func stageResult(n *workflow.Node, res *agent.Result, text, status string, u llm.Usage) (*workflow.StageResult, error) {
	out := &workflow.StageResult{Output: text, Status: status, Usage: workflow.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}}
	if _, ok := n.Options["output_schema"]; ok {
		b, err := jsonvalue.Encode(res.Output)
		if err != nil {
			return nil, fmt.Errorf("node '%s': output: %v", n.Name, err)
		}
		out.Output = string(b)
	}
	return out, nil
}

// stageOptions are the options of a stage's loop or call: the node's
// options (checked when the graph was built), its model policy, its
// session and its tools.
func stageOptions(g *Graph, n *workflow.Node, sessionID string) (*options, error) {
	table, fn := agent.LoopOptions(), "agent_loop"
	if n.Mode == workflow.ModeLLM {
		table, fn = agent.CallOptions(), "llm_call"
	}
	o := &options{fn: fn, vals: table.Empty(), raw: map[string]starlark.Value{}}
	set := func(k string, v any) error {
		if err := o.vals.Set(k, v); err != nil {
			return fmt.Errorf("%s: %w", fn, err)
		}
		return nil
	}
	for k, v := range n.Options {
		if err := set(k, v); err != nil {
			return nil, err
		}
	}
	if c, ok := n.Options["compaction"]; ok {
		// read as agent_loop reads its compaction option
		o.raw["compaction"] = vm.ToStarlark(c)
	}
	p := n.ModelPolicy
	for k, v := range map[string]string{"provider": p.Provider, "model": p.Model, "base_url": p.BaseURL, "api_version": p.APIVersion, "session_id": sessionID} {
		if v != "" {
			if err := set(k, v); err != nil {
				return nil, err
			}
		}
	}
	if p.Temperature != nil {
		if err := set("temperature", *p.Temperature); err != nil {
			return nil, err
		}
	}
	if p.MaxTokens != nil {
		if err := set("max_tokens", int64(*p.MaxTokens)); err != nil {
			return nil, err
		}
	}
	if tools := g.tools[n.Name]; tools != nil {
		o.raw["tools"] = tools
		if err := set("tools", tools); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// fn calls an fn stage's function with {task, output, outputs, vars,
// run_id, node}, outputs a read-only view of the run's outputs.
func (x *stageExecutor) fn(s *workflow.Stage) (*workflow.StageResult, error) {
	c := x.graph.fns[s.Node.Name]
	if c == nil {
		return nil, fmt.Errorf("node '%s' has no function", s.Node.Name)
	}
	// Built directly, keys in sorted order as vm.ToStarlark would give
	// them. outputs is a view of the run's map, not a copy, so a stage
	// costs the same however many nodes have run (the map does not
	// change while the function runs, and nothing of the call outlives
	// it but its result, which is converted).
	ctx := starlark.NewDict(6)
	for _, kv := range [...]struct {
		k string
		v starlark.Value
	}{
		{"node", starlark.String(s.Node.Name)}, {"output", starlark.String(s.Input)},
		{"outputs", vm.NewStringMapView(s.Outputs)}, {"run_id", starlark.String(s.RunID)},
		{"task", starlark.String(s.Task)}, {"vars", vm.ToStarlark(s.Vars)},
	} {
		_ = ctx.SetKey(starlark.String(kv.k), kv.v)
	}
	v, err := starlark.Call(x.thread, c, starlark.Tuple{ctx}, nil)
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return &workflow.StageResult{}, nil
	case starlark.String:
		return &workflow.StageResult{Output: string(v)}, nil
	case *starlark.Dict:
		x, err := vm.FromStarlark(v, "result")
		if err != nil {
			return nil, fmt.Errorf("%s returned %v", c.Name(), err)
		}
		vars := x.(map[string]any)
		res := &workflow.StageResult{}
		if out, ok := vars["output"]; ok {
			s, isStr := out.(string)
			if !isStr {
				return nil, fmt.Errorf("%s returned an 'output' of type %T, want string", c.Name(), out)
			}
			res.Output = s
			delete(vars, "output")
		}
		res.Vars = vars
		return res, nil
	}
	return nil, fmt.Errorf("%s returned %s, want a string, a dict or None", c.Name(), v.Type())
}
