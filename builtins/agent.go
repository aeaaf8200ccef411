package builtins

// Agent builtins.
//
//	agent_loop(prompt, system=None, options=None, **kwargs) -> dict
//	llm_call(prompt, system=None, options=None, **kwargs) -> dict

import (
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

func agentSpecs() []Spec {
	const area = "Agents"
	return append([]Spec{
		{"agent_loop", "(prompt, system=None, options=None, **kwargs) -> dict",
			"Run a tool-calling agent loop; options as a dict or keywords (the agent_loop options).", area, agentLoop},
		{"llm_call", "(prompt, system=None, options=None, **kwargs) -> dict",
			"One model call, no tool loop: {text, tool_calls, model, usage, stop_reason, cost_usd, output}.", area, llmCall},
	}, toolSpecs()...)
}

// callOptions are the options agent_loop and llm_call share, read from
// their unpacked values.
type callOptions struct {
	vals       agent.Values
	provider   string
	model      string
	baseURL    string
	apiVersion string // Azure OpenAI's api-version ("" if unset)
	sessionID  string // "" for anonymous
	tools      []Tool
	targets    []llm.TargetSpec // the primary, then the fallbacks
}

func parseCallOptions(o *options) (*callOptions, error) {
	fn := o.fn
	c := &callOptions{vals: o.vals, provider: o.string("provider"), model: o.string("model"), baseURL: o.string("base_url")}
	var err error
	if c.targets, err = o.vals.Targets(); err != nil {
		return nil, fail(fn, err)
	}
	c.apiVersion = c.targets[0].APIVersion
	if o.has("session_id") {
		c.sessionID = o.string("session_id")
		if _, given := o.get("session_id"); given && c.sessionID == "" {
			return nil, fmt.Errorf("%s: option 'session_id' must not be empty", fn)
		}
	}
	if v, ok := o.get("tools"); ok {
		tools, err := toolsFromStarlark(fn, v)
		if err != nil {
			return nil, err
		}
		c.tools = tools
	}
	if _, err := o.vals.Thinking(); err != nil {
		return nil, fail(fn, err)
	}
	return c, nil
}

// chain resolves the call's provider and fallbacks (llm.Settings.Chain);
// the VM's mock queue wraps every provider.
func chain(st *vm.State, c *callOptions) ([]llm.Target, error) {
	return st.LLM.Chain(c.targets, st.Mock.Wrap)
}

// engineConfig builds the agent configuration common to both builtins.
// Its session is the named one (the loop opens it, creating it if
// missing) or an anonymous one in a private store that is discarded
// afterwards.
func engineConfig(thread *starlark.Thread, st *vm.State, fn, prompt string, system starlark.Value, c *callOptions) (*agent.Config, error) {
	cfg := &agent.Config{Prompt: prompt, Clock: st.Clock, ToolErrors: agent.ToolErrorsReport}
	if err := c.vals.Configure(cfg); err != nil {
		return nil, fail(fn, err)
	}
	if cfg.Request.Model == "" {
		cfg.Request.Model = st.LLM.Model
	}
	if system != nil && system != starlark.None {
		s, ok := system.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter system: got %s, want string or None", fn, system.Type())
		}
		cfg.System = string(s)
	}
	targets, err := chain(st, c)
	if err != nil {
		return nil, fail(fn, err)
	}
	cfg.Chain = targets
	for _, t := range c.tools {
		cfg.Tools = append(cfg.Tools, t.Bind(thread))
	}
	if c.sessionID != "" {
		// tools the host attached to the session (skein acp: the
		// client's MCP servers)
		cfg.Tools = append(cfg.Tools, st.SessionTools(c.sessionID)...)
	}
	// The loop opens the session (creating it if missing).
	if c.sessionID != "" {
		cfg.Store, cfg.SessionID = st.Store, c.sessionID
	} else {
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(1), sessions.WithClock(st.Clock), sessions.WithIDs(st.NewID), sessions.WithRedactor(st.Store.Redactor()))
		if err != nil {
			return nil, err
		}
		cfg.Store, cfg.SessionID = store, st.NewID()
	}
	cfg.Hooks.Emit = func(e sessions.Event) error {
		if len(cfg.Store.Subscribers(e.SessionID)) == 0 {
			return nil
		}
		return deliver(thread, cfg.Store, []sessions.Event{e})
	}
	cfg.Hooks.Listening = func() bool { return len(cfg.Store.Subscribers(cfg.SessionID)) > 0 }
	cfg.Prices = st.LLM.Prices
	if st.LLM.Budget != nil {
		cfg.Budgets = append(cfg.Budgets, st.LLM.Budget)
	}
	return cfg, nil
}

// deliver calls the session's subscribers with each event, in
// registration order, on the calling thread. A subscriber's error is
// returned unchanged (its traceback survives).
func deliver(thread *starlark.Thread, store *sessions.Store, events []sessions.Event) error {
	for i := range events {
		for _, sub := range store.Subscribers(events[i].SessionID) {
			cb, ok := sub.(starlark.Callable)
			if !ok {
				return fmt.Errorf("internal error: subscriber %s of session '%s' is a %T, not a Starlark function", sub.Name(), events[i].SessionID, sub)
			}
			if _, err := starlark.Call(thread, cb, starlark.Tuple{eventToStarlark(&events[i])}, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func agentLoop(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	prompt, system, o, err := unpackCall(thread, b, args, kwargs, agent.LoopOptions())
	if err != nil {
		return nil, err
	}
	res, err := runLoop(thread, prompt, system, o)
	if err != nil {
		return nil, err
	}
	return resultToStarlark(res), nil
}

// runLoop runs one agent loop of the unpacked options o (of
// agent.LoopOptions): agent_loop, workflow stages and agent_spawn all run
// their loops here, straight into agent.Run. Errors are prefixed with
// o.fn.
func runLoop(thread *starlark.Thread, prompt string, system starlark.Value, o *options) (*loopResult, error) {
	fn := o.fn
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, err
	}
	var b *binding
	if id := o.string("session_id"); id != "" {
		if b, err = bindingOf(vm.ContextOf(thread), st, id); err != nil {
			return nil, fail(fn, err)
		}
	}
	if b != nil && b.def != nil {
		// a bound session runs its agent
		id := o.string("session_id")
		if system, err = boundSystem(fn, id, b, system); err != nil {
			return nil, err
		}
		if prompt, err = boundPrompt(fn, b, prompt); err != nil {
			return nil, err
		}
		if o, err = boundOptions(thread, st, o, b, id); err != nil {
			return nil, err
		}
	}
	return runLoopWith(thread, st, prompt, system, o, b)
}

// runLoopWith runs a loop of options o on a session of binding b (nil:
// unbound): the context's working directory and tier narrow the
// workspace; a bound agent's approve list and fallback chain apply.
func runLoopWith(thread *starlark.Thread, st *vm.State, prompt string, system starlark.Value, o *options, b *binding) (*loopResult, error) {
	fn := o.fn
	c, err := parseCallOptions(o)
	if err != nil {
		return nil, err
	}
	if b != nil {
		policy, err := contextPolicy(thread, fn, b.ctx)
		if err != nil {
			return nil, err
		}
		if policy != nil {
			restore := vm.WithWorkspace(thread, policy)
			defer restore()
		}
	}
	depth, err := loopDepth(thread, fn)
	if err != nil {
		return nil, err
	}
	// A narrowed workspace holds everything the loop runs (tools,
	// subscribers, callbacks), from binding the tools on.
	policy, err := loopWorkspace(thread, o)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		restore := vm.WithWorkspace(thread, policy)
		defer restore()
	}
	cfg, err := engineConfig(thread, st, fn, prompt, system, c)
	if err != nil {
		return nil, err
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = agent.DefaultMaxIterations
	}
	if cfg.MaxIterations, err = nestedBudget(thread, fn, cfg.MaxIterations); err != nil {
		return nil, err
	}
	cfg.Budgets = inheritBudgets(thread, cfg.Budgets)
	if c.sessionID == "" {
		cfg.MaxTurns = -1 // an anonymous session is new: no cap
	}
	cfg.DefaultSessionCap = st.MaxTurns
	if cfg.Compaction, err = loopCompaction(thread, st, o, c); err != nil {
		return nil, err
	}
	if postTurn := o.callable("post_turn_callback"); postTurn != nil {
		cfg.Hooks.PostTurn = func(info agent.TurnInfo) (agent.PostTurn, error) {
			return callPostTurn(thread, fn, postTurn, info)
		}
	}
	if b != nil && b.def != nil {
		cfg.Approve = b.def.Approve
		cfg.Retry.FallbackTransientOnly = true
		cfg.Approval = approvalFunc(thread, fn, st, o.callable("approve"))
	}
	if parent := currentLoop(thread); parent != nil && parent.sessionID != cfg.SessionID {
		cfg.ParentStore, cfg.ParentID = parent.store, parent.sessionID
	}
	frame := &loopFrame{sessionID: cfg.SessionID, store: cfg.Store, provider: c.provider, model: c.model, baseURL: c.baseURL,
		apiVersion: c.apiVersion, maxIterations: cfg.MaxIterations, depth: depth, budgets: cfg.Budgets, bound: b}
	cfg.NestedIterations = func() int { return frame.childIterations }
	emit := cfg.Hooks.Emit
	cfg.Hooks.Emit = func(e sessions.Event) error {
		if e.Type == agent.EventTurnStart {
			frame.iterations++
		}
		return emit(e)
	}
	tools := &toolLists{}
	tools.hook(cfg)
	pop := pushLoop(thread, frame)
	res, err := agent.Run(vm.ContextOf(thread), *cfg)
	pop()
	endNested(thread, frame)
	if err != nil {
		return nil, fail(fn, err)
	}
	return &loopResult{Result: res, tools: tools}, nil
}

// approvalFunc decides calls of tools a bound agent lists in approve:
// the loop's approve callback, else the run's (--approve), else none
// (every such call is refused).
func approvalFunc(thread *starlark.Thread, fn string, st *vm.State, cb starlark.Callable) func(string, map[string]any) (bool, error) {
	if cb == nil {
		return st.Approve
	}
	return func(tool string, args map[string]any) (bool, error) {
		v, err := starlark.Call(thread, cb, starlark.Tuple{starlark.String(tool), vm.ToStarlark(args)}, nil)
		if err != nil {
			return false, err
		}
		ok, isBool := v.(starlark.Bool)
		if !isBool {
			return false, fmt.Errorf("%s: approve returned %s, want bool", fn, v.Type())
		}
		return bool(ok), nil
	}
}

func callPostTurn(thread *starlark.Thread, fn string, cb starlark.Callable, info agent.TurnInfo) (agent.PostTurn, error) {
	// Built directly (not through vm.ToStarlark of a map): it runs every
	// turn. Keys in sorted order, as vm.ToStarlark would give them.
	calls := make([]starlark.Value, len(info.ToolCalls))
	for i, name := range info.ToolCalls {
		calls[i] = starlark.String(name)
	}
	d := starlark.NewDict(5)
	_ = d.SetKey(starlark.String("iteration"), starlark.MakeInt(info.Iteration))
	_ = d.SetKey(starlark.String("session_id"), starlark.String(info.SessionID))
	_ = d.SetKey(starlark.String("text"), starlark.String(info.Text))
	_ = d.SetKey(starlark.String("tool_calls"), starlark.NewList(calls))
	_ = d.SetKey(starlark.String("usage"), vm.ToStarlark(info.Usage.Map()))
	v, err := starlark.Call(thread, cb, starlark.Tuple{d}, nil)
	if err != nil {
		return agent.PostTurn{}, err
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return agent.PostTurn{}, nil
	case starlark.Bool:
		return agent.PostTurn{Stop: bool(v)}, nil
	case starlark.String:
		return agent.PostTurn{Feedback: string(v)}, nil
	case *starlark.Dict:
		o, err := unpackOptions(postTurnTable(), fn+": post_turn_callback result", v, nil)
		if err != nil {
			return agent.PostTurn{}, err
		}
		return agent.PostTurn{Stop: o.bool("stop"), Feedback: o.string("feedback")}, nil
	}
	return agent.PostTurn{}, fmt.Errorf("%s: post_turn_callback returned %s, want None, a bool, a string or {stop, feedback}", fn, v.Type())
}

// loopResult is an agent loop's result with its tool lists as Starlark
// values, built as the loop went (runLoopWith).
type loopResult struct {
	*agent.Result
	tools *toolLists
}

// toolLists are result["tools"]'s lists, kept as the loop goes
// (agent.Hooks.ToolCalled and ToolEnded): an element appended per call,
// so returning the result costs the same however many tools the loop
// called. Each distinct name is converted once (a long loop calls a few
// tools many times).
type toolLists struct {
	calls, succeeded, failed []starlark.Value
	names                    map[string]starlark.Value
	last                     string
	lastV                    starlark.Value
}

// hook sets cfg's hooks to keep the lists.
func (t *toolLists) hook(cfg *agent.Config) {
	cfg.Hooks.ToolCalled = func(name string) { t.calls = append(t.calls, t.value(name)) }
	cfg.Hooks.ToolEnded = func(name string, failed bool) {
		if failed {
			t.failed = append(t.failed, t.value(name))
		} else {
			t.succeeded = append(t.succeeded, t.value(name))
		}
	}
}

// value is name as a Starlark string, converted once.
func (t *toolLists) value(name string) starlark.Value {
	if t.lastV != nil && name == t.last {
		return t.lastV // a tool called again and again
	}
	v, ok := t.names[name]
	if !ok {
		if t.names == nil {
			t.names = map[string]starlark.Value{}
		}
		v = starlark.String(name)
		t.names[name] = v
	}
	t.last, t.lastV = name, v
	return v
}

func resultToStarlark(res *loopResult) starlark.Value {
	d := starlark.NewDict(8)
	set := func(k string, v starlark.Value) { _ = d.SetKey(starlark.String(k), v) }
	set("status", starlark.String(string(res.Status)))
	set("text", starlark.String(res.Text))
	set("visible_text", starlark.String(res.VisibleText))
	set("session_id", starlark.String(res.SessionID))
	set("llm", vm.ToStarlark(map[string]any{
		"iterations": res.Iterations, "duration_ms": res.Duration.Milliseconds(),
		"input_tokens": res.Usage.InputTokens, "output_tokens": res.Usage.OutputTokens, "calls": res.Calls,
		"cost_usd": costValue(res.Result),
	}))
	tools := starlark.NewDict(3)
	_ = tools.SetKey(starlark.String("calls"), starlark.NewList(res.tools.calls))
	_ = tools.SetKey(starlark.String("failed"), starlark.NewList(res.tools.failed))
	_ = tools.SetKey(starlark.String("successful"), starlark.NewList(res.tools.succeeded))
	set("tools", tools)
	set("messages", newMessageList(res.Messages))
	set("output", vm.ToStarlark(res.Output))
	return d
}

// costValue is a result's cost_usd: a float, or None when unknown.
func costValue(res *agent.Result) any {
	if !res.CostKnown {
		return nil
	}
	return res.CostUSD
}

// unpackCall unpacks (prompt, system=None, options=None, **kwargs); the
// thread's call defaults (vm.CallDefaults) fill in the options and system
// prompt the call does not give.
func unpackCall(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, table *agent.Table) (string, starlark.Value, *options, error) {
	var prompt string
	var system, positional starlark.Value = starlark.None, starlark.None
	named, rest := splitKwargs(kwargs, "prompt", "system", "options")
	if err := starlark.UnpackArgs(b.Name(), args, named, "prompt", &prompt, "system?", &system, "options?", &positional); err != nil {
		return "", nil, nil, err
	}
	if strings.TrimSpace(prompt) == "" {
		return "", nil, nil, fmt.Errorf("%s: prompt is empty: the user message needs text", b.Name())
	}
	o, err := unpackOptions(table, b.Name(), positional, rest)
	if err != nil {
		return "", nil, nil, err
	}
	if err := applyCallDefaults(thread, o, &system); err != nil {
		return "", nil, nil, err
	}
	return prompt, system, o, nil
}

// applyCallDefaults gives o the thread's call defaults (vm.CallDefaults:
// an eval variant's options) that its table has and the call did not
// give, and *system the default system prompt when it is None; keys in
// skip are left alone.
func applyCallDefaults(thread *starlark.Thread, o *options, system *starlark.Value, skip ...string) error {
	defaults := vm.CallDefaults(thread)
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		if !slices.Contains(skip, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case k == "system":
			if *system == starlark.None {
				*system = defaults[k]
			}
		case o.vals.Table().Lookup(k) != nil && !o.has(k):
			if err := o.set(k, defaults[k], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckCallDefaults checks options meant as call defaults
// (vm.WithCallDefaults): each must be an agent_loop option with a value
// it accepts, or "system" (a string). fn names the caller in errors.
func CheckCallDefaults(fn string, d map[string]starlark.Value) error {
	rest := make([]starlark.Tuple, 0, len(d))
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "system" {
			if _, ok := d[k].(starlark.String); !ok {
				return fmt.Errorf("%s: 'system' must be a string, got %s", fn, d[k].Type())
			}
			continue
		}
		rest = append(rest, starlark.Tuple{starlark.String(k), d[k]})
	}
	_, err := unpackOptions(agent.LoopOptions(), fn, starlark.None, rest)
	return err
}

func llmCall(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	prompt, system, o, err := unpackCall(thread, b, args, kwargs, agent.CallOptions())
	if err != nil {
		return nil, err
	}
	resp, res, err := runCall(thread, prompt, system, o)
	if err != nil {
		return nil, err
	}
	calls := make([]any, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		calls[i] = map[string]any{"id": tc.ID, "name": tc.Name, "arguments": tc.Arguments}
	}
	return vm.ToStarlark(map[string]any{
		"text": resp.Text, "tool_calls": calls, "model": resp.Model, "usage": resp.Usage.Map(), "stop_reason": resp.StopReason,
		"cost_usd": costValue(res), "output": res.Output,
	}), nil
}

// runCall makes one model call of the unpacked options o (of
// agent.CallOptions): llm_call and workflow llm stages call it. Errors
// are prefixed with o.fn.
func runCall(thread *starlark.Thread, prompt string, system starlark.Value, o *options) (*llm.Response, *agent.Result, error) {
	fn := o.fn
	c, err := parseCallOptions(o)
	if err != nil {
		return nil, nil, err
	}
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := engineConfig(thread, st, fn, prompt, system, c)
	if err != nil {
		return nil, nil, err
	}
	resp, res, err := agent.Call(vm.ContextOf(thread), *cfg)
	if err != nil {
		return nil, nil, fail(fn, err)
	}
	if resp == nil && res.Status == agent.StatusBudgetExhausted {
		return nil, nil, fmt.Errorf("%s: not called: the call would go over the run's cost cap (--max-cost-usd)", fn)
	}
	if resp == nil {
		return nil, nil, fmt.Errorf("%s: the call timed out after %s", fn, cfg.Timeout)
	}
	return resp, res, nil
}

// loopCompaction reads agent_loop's context options: compaction ("auto",
// "none", a strategy name or a dict of compaction options),
// compact_threshold, tool_output_max_chars, compress_callback and
// context_budget.
func loopCompaction(thread *starlark.Thread, st *vm.State, o *options, c *callOptions) (*agent.Compaction, error) {
	comp := &agent.Compaction{Enabled: true, Options: compact.DefaultOptions(),
		Threshold: o.int("compact_threshold"), ToolOutputMaxChars: o.int("tool_output_max_chars"), ContextBudget: o.int("context_budget")}
	fn := o.fn
	switch v := o.raw["compaction"].(type) {
	case nil, starlark.NoneType:
	case starlark.String:
		switch name := string(v); {
		case name == "auto":
		case name == "none":
			comp.Enabled = false
		case name == compact.StrategyCustom:
			return nil, fmt.Errorf("%s: compaction \"custom\" needs a custom_compactor: pass a dict {compact_strategy: \"custom\", custom_compactor: fn}", fn)
		case slices.Contains(compact.Strategies, name):
			comp.Options.Strategy = name
			if name == compact.StrategyLLM {
				opts, err := compactOptions(thread, st, strategyOnly(fn, v), c.provider, c.model)
				if err != nil {
					return nil, err
				}
				comp.Options = opts
			}
		default:
			return nil, fmt.Errorf("%s: unknown compaction '%s' (expected one of: auto, none, %s, or a dict of compaction options)", fn, name, strings.Join(compact.Strategies, ", "))
		}
	case *starlark.Dict:
		co, err := unpackOptions(agent.CompactionOptions(), fn+": compaction", v, nil)
		if err != nil {
			return nil, err
		}
		if comp.Options, err = compactOptions(thread, st, co, c.provider, c.model); err != nil {
			return nil, err
		}
		if comp.Options.TokenThreshold > 0 {
			// in a loop the threshold decides when to compact; once
			// compacting, compact
			comp.Threshold, comp.Options.TokenThreshold = comp.Options.TokenThreshold, 0
		}
		if comp.Options.ToolOutputMaxChars > 0 {
			comp.ToolOutputMaxChars = comp.Options.ToolOutputMaxChars
		}
	default:
		return nil, fmt.Errorf("%s: option 'compaction': got %s, want string or dict", fn, v.Type())
	}
	if _, ok := o.get("compact_threshold"); ok {
		comp.Threshold = o.int("compact_threshold")
	}
	if _, ok := o.get("tool_output_max_chars"); ok {
		comp.ToolOutputMaxChars = o.int("tool_output_max_chars")
	}
	// One compress_callback serves both uses: new tool results of the
	// loop and archived tool results its compactions shorten. The loop's
	// option wins over the compaction dict's.
	if compress := o.callable("compress_callback"); compress != nil {
		comp.Options.Compress = compressFunc(thread, fn, compress)
	}
	return comp, nil
}

// strategyOnly is a compaction dict of just compact_strategy: agent_loop's
// compaction given as a strategy name.
func strategyOnly(fn string, name starlark.String) *options {
	o, err := unpackOptions(agent.CompactionOptions(), fn, starlark.None, []starlark.Tuple{{starlark.String("compact_strategy"), name}})
	if err != nil {
		panic("builtins: " + err.Error()) // the caller checked the name
	}
	return o
}
