package builtins

// Sub-agents (docs/workflows.md, "Sub-agents: agent_spawn").
//
//	agent_spawn(task, tools=None, carry="fork", system=None, max_iterations=None, agent=None, **options) -> dict

import (
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

func spawnSpecs() []Spec {
	return []Spec{
		{"agent_spawn", "(task, tools=None, carry=\"fork\", system=None, max_iterations=None, agent=None, **options) -> dict",
			"Run a sub-agent loop from inside a running loop (a tool, a callback) on a child session; returns its agent_loop result.",
			"Agents", agentSpawn},
	}
}

// Carry modes of agent_spawn: what the child session starts from.
var carryModes = []string{"compact", "fork", "inherit", "reset"}

// Event types agent_spawn logs on the parent session.
const (
	eventSubagentStart = "subagent_start"
	eventSubagentEnd   = "subagent_end"
)

func agentSpawn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	fn := b.Name()
	named, rest := splitKwargs(kwargs, "task", "tools", "carry", "system", "max_iterations", "agent")
	var task, carry string = "", ""
	var tools, system, maxIter, agentV starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(fn, args, named, "task", &task, "tools?", &tools, "carry?", &carry, "system?", &system, "max_iterations?", &maxIter, "agent?", &agentV); err != nil {
		return nil, err
	}
	if carry == "" {
		carry = "fork"
		if agentV != starlark.None {
			carry = "reset" // another agent starts from its own prompt
		}
	}
	if strings.TrimSpace(task) == "" {
		return nil, fmt.Errorf("%s: task is empty: the child's user message needs text", fn)
	}
	o, err := unpackOptions(spawnTable(), fn, starlark.None, rest)
	if err != nil {
		return nil, err
	}
	// The child inherits its provider and model from its parent; a
	// variant's other options are its defaults too.
	if err := applyCallDefaults(thread, o, &system, "provider", "model", "base_url", "api_version"); err != nil {
		return nil, err
	}
	if !slices.Contains(carryModes, carry) {
		return nil, fmt.Errorf("%s: unknown carry '%s' (expected one of: %s)", fn, carry, strings.Join(carryModes, ", "))
	}
	budget := 0
	if maxIter != starlark.None {
		n, ok := maxIter.(starlark.Int)
		v, exact := n.Int64()
		if !ok || !exact {
			return nil, fmt.Errorf("%s: for parameter max_iterations: got %s, want int or None", fn, maxIter.Type())
		}
		if v < 1 {
			return nil, fmt.Errorf("%s: 'max_iterations' must be >= 1", fn)
		}
		budget = int(v)
	}
	parent := currentLoop(thread)
	if parent == nil {
		return nil, fmt.Errorf("%s: no current session (call it from a tool or a callback of a running agent_loop)", fn)
	}
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, err
	}
	if _, err := loopDepth(thread, fn); err != nil {
		return nil, err
	}
	if err := checkChildAPIVersion(st, o, parent); err != nil {
		return nil, fail(fn, err)
	}
	if budget, err = childBudget(fn, parent, budget); err != nil {
		return nil, err
	}
	if agentV != starlark.None {
		def, err := spawnDefinition(fn, parent, agentV)
		if err != nil {
			return nil, err
		}
		if tools != starlark.None || system != starlark.None {
			return nil, fmt.Errorf("%s: with agent=, the agent decides the child's tools and system prompt", fn)
		}
		res, err := spawnAgent(thread, fn, parent, def, task, carry, budget, o)
		if err != nil {
			return nil, err
		}
		return resultToStarlark(res), nil
	}
	ctx := vm.ContextOf(thread)
	child, err := childSession(thread, st, fn, parent, carry, nil)
	if err != nil {
		return nil, err
	}
	logParent := func(typ string, data map[string]any) error {
		events, err := parent.store.Apply(ctx, parent.sessionID, &sessions.Change{Events: []sessions.Event{sessions.NewEvent(typ, data)}})
		if err != nil {
			return fail(fn, err)
		}
		return deliver(thread, parent.store, events)
	}
	// The model asked of the child: its own option, else the parent's,
	// else the run's default ("" when the provider's default answers).
	model := parent.model
	if o.has("model") {
		model = o.string("model")
	}
	if model == "" {
		model = st.LLM.Model
	}
	start := map[string]any{"child_id": child, "task": task, "carry": carry, "role": "agent_spawn"}
	if model != "" {
		start["model"] = model
	}
	if err := logParent(eventSubagentStart, start); err != nil {
		return nil, err
	}
	lo, err := childOptions(o, parent, child, budget, tools)
	if err != nil {
		return nil, err
	}
	res, err := runLoop(thread, task, system, lo)
	if err != nil {
		_ = logParent(eventSubagentEnd, map[string]any{"child_id": child, "role": "agent_spawn", "status": "failed", "error": err.Error()})
		return nil, err
	}
	end := map[string]any{"child_id": child, "role": "agent_spawn", "status": string(res.Status), "output": res.VisibleText,
		"input_tokens": int64(res.Usage.InputTokens), "output_tokens": int64(res.Usage.OutputTokens)}
	if answered := answeredModel(res.Messages); answered != "" {
		end["model"] = answered
	} else if model != "" {
		end["model"] = model
	}
	if err := logParent(eventSubagentEnd, end); err != nil {
		return nil, err
	}
	return resultToStarlark(res), nil
}

// spawnDefinition is the agent agent_spawn(agent=) runs: an agent value,
// or the name of a specialist of the running loop's bound agent.
func spawnDefinition(fn string, parent *loopFrame, v starlark.Value) (*agent.Definition, error) {
	switch v := v.(type) {
	case *Agent:
		return v.def, nil
	case starlark.String:
		if parent.bound == nil || parent.bound.def == nil {
			return nil, fmt.Errorf("%s: agent '%s': the current session is not bound to an agent with specialists (pass an agent value)", fn, string(v))
		}
		d := parent.bound.def
		if s := d.Specialist(string(v)); s != nil {
			return s, nil
		}
		names := make([]string, len(d.Specialists))
		for i, s := range d.Specialists {
			names[i] = s.Name
		}
		return nil, fmt.Errorf("%s: agent '%s' is not a specialist of agent '%s' (its specialists: %s)", fn, string(v), d.Name, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%s: for parameter agent: got %s, want agent or string", fn, v.Type())
}

// childOptions are the options of a child's loop: those given to
// agent_spawn, the child's session, budget and tools, and the parent's
// provider, model and base URL where the spawn names none of its own (and
// the parent's api_version only with the parent's provider).
func childOptions(o *options, parent *loopFrame, child string, budget int, tools starlark.Value) (*options, error) {
	lo := &options{fn: "agent_loop", vals: agent.LoopOptions().Empty(), raw: map[string]starlark.Value{}}
	for k, v := range o.raw {
		lo.raw[k] = v
	}
	for k, v := range o.vals.Given() {
		if err := lo.vals.Set(k, v); err != nil {
			return nil, fmt.Errorf("%s: %w", o.fn, err)
		}
	}
	set := map[string]any{"session_id": child, "max_iterations": int64(budget)}
	inherited := map[string]string{"provider": parent.provider, "model": parent.model, "base_url": parent.baseURL}
	if !o.has("provider") {
		// the api-version belongs to the parent's provider: a child
		// naming its own provider does not get it
		inherited["api_version"] = parent.apiVersion
	}
	for k, v := range inherited {
		if !o.has(k) && v != "" {
			set[k] = v
		}
	}
	if tools != starlark.None {
		lo.raw["tools"] = tools
		set["tools"] = tools
	}
	for k, v := range set {
		if err := lo.vals.Set(k, v); err != nil {
			return nil, fmt.Errorf("%s: %w", o.fn, err)
		}
	}
	return lo, nil
}

// answeredModel is the model of the last assistant message of an
// agent_loop result's messages, or "".
func answeredModel(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.RoleAssistant {
			return msgs[i].Model
		}
	}
	return ""
}

// childSession makes the child session of carry and returns its id; a
// new child is started with started (the data of its session:started
// event, nil: none).
func childSession(thread *starlark.Thread, st *vm.State, fn string, parent *loopFrame, carry string, started sessions.Started) (string, error) {
	ctx := vm.ContextOf(thread)
	if parent.store != st.Store && carry != "reset" {
		return "", fmt.Errorf("%s: carry '%s' needs the current loop's session in the store, and this loop is anonymous (give it a session_id, or use carry \"reset\")", fn, carry)
	}
	if carry == "inherit" {
		// the child runs on the parent's session itself, which must not
		// be in the middle of a tool call
		msgs, err := st.Store.Messages(ctx, parent.sessionID)
		if err != nil {
			return "", fail(fn, err)
		}
		if closedPrefix(msgs) != len(msgs) {
			return "", fmt.Errorf("%s: carry 'inherit' runs the child on session '%s' itself, which has a tool call in progress: call it from a post_turn_callback, or use carry \"fork\"", fn, parent.sessionID)
		}
		return parent.sessionID, nil
	}
	child := st.NewID()
	if parent.store != st.Store {
		// an anonymous parent: a new empty session, linked by metadata
		if _, err := st.Store.OpenWith(ctx, child, sessions.OpenOptions{Info: sessions.Info{Started: started}}); err != nil {
			return "", fail(fn, err)
		}
		return child, nil
	}
	// The parent is inside a tool call: the child keeps the transcript up
	// to the assistant message whose calls are still open, so its own
	// prompt follows a complete turn.
	msgs, err := st.Store.Messages(ctx, parent.sessionID)
	if err != nil {
		return "", fail(fn, err)
	}
	keep := closedPrefix(msgs)
	if carry == "reset" {
		keep = 0
	}
	if _, err := st.Store.Fork(ctx, parent.sessionID, child, sessions.ForkOptions{KeepFirst: keep, Started: started}); err != nil {
		return "", fail(fn, err)
	}
	if carry == "compact" && keep > 0 {
		if _, err := starlark.Call(thread, starlark.NewBuiltin("agent_session_compact", sessionCompact), starlark.Tuple{starlark.String(child)}, nil); err != nil {
			return "", fmt.Errorf("%s: compacting the child: %w", fn, err)
		}
	}
	return child, nil
}

// closedPrefix is the length of the longest prefix of msgs that leaves no
// tool call without its result.
func closedPrefix(msgs []message.Message) int {
	open := map[string]bool{}
	keep := 0
	for i := range msgs {
		m := &msgs[i]
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.Role == message.RoleTool {
			delete(open, m.ToolCallID)
		}
		if len(open) == 0 {
			keep = i + 1
		}
	}
	return keep
}

// checkChildAPIVersion refuses, before the child's session is made, an
// api_version option that is malformed or given for a child provider
// that is not Azure OpenAI (the child's provider is its own, else the
// parent's, else resolved as agent_loop resolves it).
func checkChildAPIVersion(st *vm.State, o *options, parent *loopFrame) error {
	v, err := o.vals.APIVersion()
	if err != nil || v == "" {
		return err
	}
	provider, model := parent.provider, parent.model
	if o.has("provider") {
		provider = o.string("provider")
	}
	if o.has("model") {
		model = o.string("model")
	}
	if model == "" {
		model = st.LLM.Model
	}
	name, err := st.LLM.ResolveName(provider, model)
	if err != nil {
		return nil // the child's loop reports it
	}
	return llm.CheckAPIVersion(name, v)
}
