package builtins

// Agent definitions (docs/agents.md, "Agent definitions").
//
//	agent_load(path) -> agent
//	agent(name, **keys) -> agent
//	agent_dump(agent) -> str

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/didyoumean"
	"github.com/skein-dev/skein/internal/yamlfile"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/vm"
)

func agentDefSpecs() []Spec {
	const area = "Agent definitions"
	return []Spec{
		{"agent_load", "(path) -> agent",
			"Read an agent file (NAME.agent.yaml): strict keys, errors with the line; its tools, skills and specialists are resolved now.", area, agentLoad},
		{"agent", "(name, **keys) -> agent",
			"An agent from the keys of an agent file (model, fallback_chain, system, tools, skills, specialists, approve, agent_loop options).", area, agentNew},
		{"agent_dump", "(agent) -> str",
			"The agent as an agent file: its frozen snapshot, keys sorted, byte-stable.", area, agentDumpBuiltin},
	}
}

// Agent is an agent definition as a Starlark value.
type Agent struct{ def *agent.Definition }

var _ starlark.HasAttrs = (*Agent)(nil)

func (a *Agent) String() string {
	if a.def.Model == "" {
		return fmt.Sprintf("<agent %s>", a.def.Name)
	}
	return fmt.Sprintf("<agent %s %s>", a.def.Name, a.def.Model)
}
func (a *Agent) Type() string          { return "agent" }
func (a *Agent) Freeze()               {}
func (a *Agent) Truth() starlark.Bool  { return true }
func (a *Agent) Hash() (uint32, error) { return starlark.String(a.def.Fingerprint()).Hash() }

// Definition returns the agent's definition.
func (a *Agent) Definition() *agent.Definition { return a.def }

// Attr returns name, description, model, fallback_chain, system, tools,
// skills (names), specialists (names), approve, fingerprint.
func (a *Agent) Attr(name string) (starlark.Value, error) {
	d := a.def
	switch name {
	case "name":
		return starlark.String(d.Name), nil
	case "description":
		return starlark.String(d.Description), nil
	case "model":
		return starlark.String(d.Model), nil
	case "system":
		return starlark.String(d.System), nil
	case "fingerprint":
		return starlark.String(d.Fingerprint()), nil
	case "fallback_chain":
		return vm.ToStarlark(d.FallbackChain), nil
	case "tools":
		return vm.ToStarlark(d.Tools), nil
	case "approve":
		return vm.ToStarlark(d.Approve), nil
	case "skills":
		names := make([]string, len(d.Skills))
		for i, s := range d.Skills {
			names[i] = s.Name
		}
		return vm.ToStarlark(names), nil
	case "specialists":
		names := make([]string, len(d.Specialists))
		for i, s := range d.Specialists {
			names[i] = s.Name
		}
		return vm.ToStarlark(names), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (a *Agent) AttrNames() []string {
	return []string{"approve", "description", "fallback_chain", "fingerprint", "model", "name", "skills", "specialists", "system", "tools"}
}

func agentLoad(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("%s: 'path' must not be empty", b.Name())
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(vm.Dir(thread), path)
	}
	d, err := LoadAgent(st, path)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return &Agent{def: d}, nil
}

// LoadAgent reads an agent file and checks that its tools (and its
// specialists' tools) exist; `skein run X.agent.yaml` and `skein serve
// --agent` use it.
func LoadAgent(st *vm.State, path string) (*agent.Definition, error) {
	if !strings.HasSuffix(path, agent.FileSuffix) {
		return nil, fmt.Errorf("%s: an agent file's name ends in %s", path, agent.FileSuffix)
	}
	d, err := agent.Load(path)
	if err != nil {
		return nil, err
	}
	if err := checkAgentTools(st, d); err != nil {
		data, _ := os.ReadFile(path)
		key := "tools"
		var ke *agent.KeyError
		if errors.As(err, &ke) {
			key, err = ke.Key, ke.Err
		}
		return nil, fmt.Errorf("%s: %w", path, lineOf(data, key, err))
	}
	return d, nil
}

// lineOf adds the line of a top-level key to err.
func lineOf(data []byte, key string, err error) error {
	ke := &agent.KeyError{Key: key, Err: err}
	if data != nil {
		ke.Line = yamlfile.KeyLine(data, key)
	}
	return ke
}

func agentNew(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("%s: got %d positional arguments, want at most 1 (the name)", b.Name(), len(args))
	}
	m := map[string]any{}
	if len(args) == 1 {
		name, ok := args[0].(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter name: got %s, want string", b.Name(), args[0].Type())
		}
		m["name"] = string(name)
	}
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s: got multiple values for parameter %s", b.Name(), k)
		}
		x, err := vm.FromStarlark(kv[1], k)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		m[k] = x
	}
	if _, ok := m["name"]; !ok {
		return nil, fmt.Errorf("%s: missing argument for name", b.Name())
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	if _, ok := m["dir"]; !ok {
		m["dir"] = vm.Dir(thread)
	}
	d, err := agent.Decode(m)
	if err == nil {
		err = checkAgentTools(st, d)
	}
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return &Agent{def: d}, nil
}

func agentDumpBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var a *Agent
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "agent", &a); err != nil {
		return nil, err
	}
	return starlark.String(a.def.Dump()), nil
}

// checkAgentTools resolves every tool name of d and its specialists, so
// an unknown tool fails when the agent is loaded.
func checkAgentTools(st *vm.State, d *agent.Definition) error {
	if _, err := agentTools(nil, st, d); err != nil {
		return err
	}
	if err := checkAgentModels(d); err != nil {
		return err
	}
	for _, s := range d.Specialists {
		if err := checkAgentTools(st, s); err != nil {
			return fmt.Errorf("specialist '%s': %w", s.Name, err)
		}
	}
	return nil
}

// checkAgentModels refuses a model or fallback_chain entry naming a
// provider skein does not know (unless the agent gives a base_url: any
// name then reaches an OpenAI-compatible server).
func checkAgentModels(d *agent.Definition) error {
	if d.Options.Has("base_url") {
		return nil
	}
	check := func(key, m string) error {
		p, _ := agent.SplitModel(m)
		if p == "" || p == llm.ProviderMock {
			return nil
		}
		if _, ok := llm.LookupPreset(p); ok {
			return nil
		}
		names := append(llm.PresetNames(), llm.ProviderMock)
		hint := ""
		if near := didyoumean.Closest(p, names); near != "" {
			hint = fmt.Sprintf("did you mean '%s'? ", near)
		}
		return &agent.KeyError{Key: key, Err: fmt.Errorf("'%s': unknown provider '%s' in '%s' (%sa model is provider/model, the provider one of: %s)", key, p, m, hint, strings.Join(names, ", "))}
	}
	if err := check("model", d.Model); err != nil {
		return err
	}
	for _, m := range d.FallbackChain {
		if err := check("fallback_chain", m); err != nil {
			return err
		}
	}
	return nil
}

// agentTools resolves an agent's tool names: the tools of its
// mcp_servers, built-in tools by name, "file.star:function" loaded
// relative to the agent's directory. thread is nil when an agent is only
// checked (at load): its MCP servers start on the first bound turn, so a
// name that may be one of their tools is not an error then.
func agentTools(thread *starlark.Thread, st *vm.State, d *agent.Definition) ([]starlark.Value, error) {
	out := make([]starlark.Value, 0, len(d.Tools))
	names := d.Tools
	if len(d.MCPServers) > 0 && thread != nil {
		mcpTools, rest, err := mcpServerTools(thread, d.Name, d.MCPServers, d.Tools)
		if err != nil {
			return nil, fmt.Errorf("'mcp_servers': %w", err)
		}
		for _, t := range mcpTools {
			out = append(out, t)
		}
		names = rest
	}
	for _, name := range names {
		if strings.Contains(name, ".star:") {
			c, err := loadFn(st, filepath.Join(d.Dir, d.Name+agent.FileSuffix), name)
			if err != nil {
				return nil, fmt.Errorf("tool '%s': %v", name, err)
			}
			out = append(out, c)
			continue
		}
		t, err := toolByName(name, nil)
		if err != nil && thread == nil && len(d.MCPServers) > 0 {
			continue // may be a tool of one of its MCP servers
		}
		if err != nil {
			return nil, fmt.Errorf("'tools': %v", strings.Replace(err.Error(), "; pass other functions in tools={name: fn}", "; or file.star:function", 1))
		}
		out = append(out, t)
	}
	return out, nil
}
