package builtins

// Sessions bound to agents (docs/agents.md, "Binding"): the frozen
// snapshot stored with the session, the session context, and what a
// bound session's agent_loop runs.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// Metadata keys of a bound session: the agent's name (the key skein
// serve files and filters sessions by), its frozen snapshot and the
// session context. Scripts set the snapshot and the context only through
// agent= and context=.
const (
	metaAgentName = agent.MetadataName
	metaAgent     = agent.MetadataSnapshot
	metaContext   = agent.MetadataContext
)

// checkReservedMetadata refuses metadata= setting the keys binding owns.
func checkReservedMetadata(fn string, info sessions.Info) error {
	for _, k := range []string{metaAgent, metaContext} {
		if _, ok := info.Metadata[k]; ok {
			param := "agent"
			if k == metaContext {
				param = "context"
			}
			return fmt.Errorf("%s: metadata key '%s' is reserved (pass %s= instead)", fn, k, param)
		}
	}
	return nil
}

// binding is what a session's metadata says it is bound to.
type binding struct {
	def *agent.Definition // nil: not bound to an agent
	ctx agent.SessionContext
}

// started is the data of the session:started event of a session that
// takes over b (a fork's child), nil when b is.
func (b *binding) started() sessions.Started {
	if b == nil {
		return nil
	}
	return startedData(b.def, &b.ctx)
}

// bindingOf reads the binding of session id from its metadata: nil when
// the session does not exist or has neither agent nor context.
func bindingOf(ctx context.Context, st *vm.State, id string) (*binding, error) {
	md, err := st.Store.Metadata(ctx, id)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return bindingFromMetadata(md)
}

// bindingFromMetadata decodes a session's binding from its metadata.
func bindingFromMetadata(md map[string]any) (*binding, error) {
	snap, hasAgent := md[metaAgent].(map[string]any)
	c, hasCtx := md[metaContext].(map[string]any)
	if !hasAgent && !hasCtx {
		return nil, nil
	}
	b := &binding{}
	var err error
	if hasAgent {
		if b.def, err = agent.Decode(snap); err != nil {
			return nil, fmt.Errorf("the session's agent snapshot: %w", err)
		}
	}
	if hasCtx {
		if b.ctx, err = agent.ParseContext(c); err != nil {
			return nil, fmt.Errorf("the session's context: %w", err)
		}
	}
	return b, nil
}

// contextArg reads a context= argument: a dict of the context keys. A
// secret (a secret value, or text holding a known secret's value) is
// refused; workingDir must lie inside the workspace root and
// fsScopeTier may only narrow the run's tier.
func contextArg(thread *starlark.Thread, fn string, v starlark.Value) (*agent.SessionContext, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter context: got %s, want dict or None", fn, v.Type())
	}
	x, err := vm.FromStarlark(d, "context")
	if err != nil {
		return nil, fmt.Errorf("%s: a secret cannot be part of a session context (%v)", fn, err)
	}
	return contextFromData(thread, fn, x.(map[string]any))
}

// contextFromData reads a context from data (a context= dict, a
// --context file, an HTTP body) with contextArg's checks.
func contextFromData(thread *starlark.Thread, fn string, m map[string]any) (*agent.SessionContext, error) {
	c, err := agent.ParseContext(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if r := redactorOf(thread); r != nil {
		for _, s := range c.Strings() {
			if s != "" && r.Redact(s) != s {
				return nil, fmt.Errorf("%s: a secret cannot be part of a session context (a value holds a secret)", fn)
			}
		}
	}
	if _, err := contextPolicy(thread, fn, c); err != nil {
		return nil, err
	}
	return &c, nil
}

// contextPolicy narrows the run's workspace to the context's workingDir
// and fsScopeTier (nil when it sets neither).
func contextPolicy(thread *starlark.Thread, fn string, c agent.SessionContext) (*workspace.Policy, error) {
	if c.WorkingDir == "" && c.FSScopeTier == "" {
		return nil, nil
	}
	current, err := policyOf(thread, fn)
	if err != nil {
		return nil, err
	}
	n := workspace.Narrowing{}
	if c.WorkingDir != "" {
		// relative to the run's workspace root, whatever loop narrowed
		// it since (a specialist's loop inside its parent's)
		st, err := stateOf(thread, fn)
		if err != nil {
			return nil, err
		}
		n.Root = c.WorkingDir
		if !filepath.IsAbs(n.Root) {
			base := st.Workspace
			if p := workspace.FromContext(vm.ContextOf(thread)); p != nil {
				base = p // the session's workspace (skein serve: its repository)
			}
			n.Root = filepath.Join(base.Root(), n.Root)
		}
	}
	if c.FSScopeTier != "" {
		if n.Tier, err = workspace.ParseTier(c.FSScopeTier); err != nil {
			return nil, fmt.Errorf("%s: context 'fsScopeTier': %w", fn, err)
		}
		if n.Tier > current.Tier() {
			return nil, fmt.Errorf("%s: context 'fsScopeTier' '%s' is wider than the run's tier '%s' (a context may only narrow it)", fn, c.FSScopeTier, current.Tier())
		}
	}
	p, err := current.Narrow(n)
	if err != nil {
		return nil, fmt.Errorf("%s: context: %w", fn, err)
	}
	return p, nil
}

// bindMetadata is the metadata of a new session bound to def (nil: no
// agent) with context c (nil: none).
func bindMetadata(def *agent.Definition, c *agent.SessionContext) map[string]any {
	m := map[string]any{}
	if def != nil {
		m[metaAgentName], m[metaAgent] = def.Name, def.Snapshot()
	}
	if c != nil {
		m[metaContext] = c.Map()
	}
	return m
}

// startedData is the data of a new bound session's session:started
// event (and of agent_bound, when an unused session is bound).
func startedData(def *agent.Definition, c *agent.SessionContext) map[string]any {
	data := map[string]any{}
	if def != nil {
		data["agent"], data["model"], data["fingerprint"] = def.Name, def.Model, def.Fingerprint()
	}
	if c != nil {
		data["context"] = c.Map()
	}
	return data
}

// checkRebind refuses opening an existing session with another agent
// (or binding a session created without one).
func checkRebind(fn, id string, existing *binding, def *agent.Definition) error {
	if def == nil {
		return nil
	}
	if existing == nil || existing.def == nil {
		return fmt.Errorf("%s: session '%s' exists without an agent; a session cannot change its agent", fn, id)
	}
	if existing.def.Fingerprint() != def.Fingerprint() {
		return fmt.Errorf("%s: session '%s' is bound to agent '%s'; a session cannot change its agent", fn, id, existing.def.Name)
	}
	return nil
}

// limitOptions are the options a call on a bound session may only lower.
var limitOptions = []string{"max_iterations", "max_cost_usd", "timeout_s"}

// fixedOptions are the options a call on a bound session may not give:
// the agent decides them.
var fixedOptions = []string{"api_version", "base_url", "fallback", "model", "provider", "tools"}

// boundOptions are the options of a loop on a session bound to b's
// agent: the agent's defaults, its model and chain, its tools (and
// load_skill, spawn_subagent), then the call's own options, which may
// only narrow the limits.
func boundOptions(thread *starlark.Thread, st *vm.State, o *options, b *binding, sessionID string) (*options, error) {
	fn, d := o.fn, b.def
	for _, k := range fixedOptions {
		if o.has(k) {
			return nil, fmt.Errorf("%s: session '%s' is bound to agent '%s': option '%s' cannot be changed per call", fn, sessionID, d.Name, k)
		}
	}
	lo := &options{fn: fn, vals: agent.LoopOptions().Empty(), raw: map[string]starlark.Value{}}
	for k, v := range d.Options.Given() {
		if err := lo.vals.Set(k, v); err != nil {
			return nil, fmt.Errorf("%s: agent '%s': %w", fn, d.Name, err)
		}
		if k == "compaction" {
			lo.raw[k] = vm.ToStarlark(v)
		}
	}
	given := o.vals.Given()
	for k := range o.raw {
		if _, ok := given[k]; !ok {
			given[k] = nil
		}
	}
	for _, k := range sortedNames(given) {
		if slices.Contains(limitOptions, k) {
			if err := checkNarrower(fn, sessionID, d, k, o, lo); err != nil {
				return nil, err
			}
		}
		x, _ := o.vals.Get(k)
		if err := lo.vals.Set(k, x); err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		if raw, ok := o.raw[k]; ok {
			lo.raw[k] = raw
		}
	}
	provider, model := agent.SplitModel(d.Model)
	set := map[string]any{}
	if provider != "" {
		set["provider"] = provider
	}
	if model != "" {
		set["model"] = model
	}
	var chain []any
	for _, m := range d.FallbackChain {
		p, mm := agent.SplitModel(m)
		e := map[string]any{"model": mm}
		if p != "" {
			e["provider"] = p
		}
		chain = append(chain, e)
	}
	if len(chain) > 0 {
		set["fallback"] = chain
	}
	for k, v := range set {
		if err := lo.vals.Set(k, v); err != nil {
			return nil, fmt.Errorf("%s: agent '%s': %w", fn, d.Name, err)
		}
	}
	tools, err := agentTools(thread, st, d)
	if err != nil {
		return nil, fmt.Errorf("%s: agent '%s': %w", fn, d.Name, err)
	}
	if len(d.Skills) > 0 {
		tools = append(tools, &skillTool{def: d, sessionID: sessionID})
	}
	if len(d.Specialists) > 0 {
		tools = append(tools, &specialistTool{def: d})
	}
	list := starlark.NewList(tools)
	lo.raw["tools"] = list
	if err := lo.vals.Set("tools", list); err != nil {
		return nil, err
	}
	return lo, nil
}

// checkNarrower refuses a per-call limit above the agent's.
func checkNarrower(fn, sessionID string, d *agent.Definition, k string, o, agentOpts *options) error {
	if _, given := o.vals.Get(k); !given {
		return nil
	}
	var wider bool
	switch k {
	case "max_iterations":
		wider = o.int(k) > agentOpts.int(k)
	case "timeout_s":
		wider = o.seconds(k) > agentOpts.seconds(k)
	case "max_cost_usd":
		if cap := agentOpts.float(k); cap != nil {
			wider = *o.float(k) > *cap
		}
	}
	if wider {
		return fmt.Errorf("%s: session '%s' is bound to agent '%s': option '%s' may only be lowered per call", fn, sessionID, d.Name, k)
	}
	return nil
}

// boundSystem is the system prompt of a bound session's loop: assembled
// from the agent (a per-call system is refused).
func boundSystem(fn, sessionID string, b *binding, system starlark.Value) (starlark.Value, error) {
	if system != nil && system != starlark.None {
		return nil, fmt.Errorf("%s: session '%s' is bound to agent '%s': option 'system' cannot be changed per call", fn, sessionID, b.def.Name)
	}
	s, err := b.def.SystemPrompt(b.ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.String(s), nil
}

// boundPrompt fills {{ctx.*}} in a bound session's prompt.
func boundPrompt(fn string, b *binding, prompt string) (string, error) {
	if !strings.Contains(prompt, "{{") {
		return prompt, nil
	}
	p, err := agent.Interpolate(prompt, b.ctx)
	if err != nil {
		return "", fmt.Errorf("%s: prompt: %w", fn, err)
	}
	return p, nil
}

// sortedNames returns m's keys, sorted.
func sortedNames(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RunAgent runs one turn of def on session id (a new id when ""),
// opening it bound to def with context (nil: none) as
// agent_session_open(id, agent=def, context=context) would, then
// agent_loop(prompt, session_id=id): `skein run AGENT.agent.yaml`,
// `skein serve --agent` and workflow nodes' agent_ref use it. It returns
// the loop's result.
func RunAgent(thread *starlark.Thread, def *agent.Definition, id string, context map[string]any, prompt string) (*agent.Result, error) {
	const fn = "agent_loop"
	st, err := stateOf(thread, fn)
	if err != nil {
		return nil, err
	}
	var sc *agent.SessionContext
	if context != nil {
		if sc, err = contextFromData(thread, "agent_session_open", context); err != nil {
			return nil, err
		}
	}
	if id == "" {
		id = st.NewID()
	}
	if err := openBound(thread, st, "agent_session_open", id, def, sc, sessions.OpenOptions{}); err != nil {
		return nil, err
	}
	o := &options{fn: fn, vals: agent.LoopOptions().Empty(), raw: map[string]starlark.Value{}}
	if err := o.vals.Set("session_id", id); err != nil {
		return nil, err
	}
	res, err := runLoop(thread, prompt, starlark.None, o)
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}

// AgentHandler serves an agent file with `skein serve --agent
// NAME.agent.yaml`: Handle runs one turn of the agent on a session bound
// to it, Bind gives a new session's binding. It implements package
// serve's Agent and Binder.
type AgentHandler struct {
	state *vm.State
	def   *agent.Definition
	file  string
}

// NewAgentHandler loads an agent file for serving.
func NewAgentHandler(st *vm.State, path string) (*AgentHandler, error) {
	d, err := LoadAgent(st, path)
	if err != nil {
		return nil, err
	}
	return &AgentHandler{state: st, def: d, file: path}, nil
}

// Name is the agent's name.
func (h *AgentHandler) Name() string { return h.def.Name }

// Bind checks a new session's context and returns its metadata (the
// agent's name and frozen snapshot, the context) and the data of its
// session:started event.
func (h *AgentHandler) Bind(ctx context.Context, sessionContext map[string]any) (map[string]any, map[string]any, error) {
	thread := h.state.NewThread("bind " + h.def.Name)
	defer h.state.Release(thread)
	restore := vm.WithContext(thread, ctx)
	defer restore()
	if p := workspace.FromContext(ctx); p != nil {
		defer vm.WithWorkspace(thread, p)()
	}
	var sc *agent.SessionContext
	if sessionContext != nil {
		var err error
		if sc, err = contextFromData(thread, "context", sessionContext); err != nil {
			return nil, nil, err
		}
	}
	return bindMetadata(h.def, sc), startedData(h.def, sc), nil
}

// Handle runs one turn of the agent on session sessionID (bound to it
// when it is new) on a new thread; cancelling ctx stops it.
func (h *AgentHandler) Handle(ctx context.Context, sessionID, text string) error {
	thread := h.state.NewThread("handle " + sessionID)
	defer h.state.Release(thread)
	vm.SetFile(thread, h.file)
	restore := vm.WithContext(thread, ctx)
	defer restore()
	if p := workspace.FromContext(ctx); p != nil {
		// the session's workspace (skein serve: its repository)
		defer vm.WithWorkspace(thread, p)()
	}
	stop := context.AfterFunc(ctx, func() { thread.Cancel(context.Cause(ctx).Error()) })
	defer stop()
	_, err := RunAgent(thread, h.def, sessionID, nil, text)
	return err
}
