package builtins

// MCP builtins: tools from Model Context Protocol servers.
//
//	mcp_server(command=None, url=None, name=None, env=None, headers=None,
//	           timeout_s=30, prefix=None) -> mcp_server
//
// command is the argv of a stdio server (argv[0] allowed by --allow-cmd);
// url a Streamable HTTP endpoint (its host allowed by --allow-net). env
// (stdio) and headers (url) map names to strings or secrets; env names
// must be allowed by --allow-env. The policy is checked before anything
// starts. The value has:
//
//	.name                      the server's name
//	.tools                     its tools, usable in agent_loop(tools=...)
//	.call(tool, args=None)     -> {text, data, images}; a tool error fails
//	.close()                   stops the server (the run's end does too)

import (
	"fmt"
	"maps"
	"slices"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

func mcpSpecs() []Spec {
	const area = "Agents"
	return []Spec{
		{"mcp_server", "(command=None, url=None, name=None, env=None, headers=None, timeout_s=30, prefix=None) -> mcp_server",
			"Start (command=argv, stdio) or connect to (url=, Streamable HTTP) an MCP server under the workspace policy: .name, .tools, .call(tool, args), .close().", area, mcpServerBuiltin},
	}
}

func mcpServerBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var command, env, headers, timeout starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None
	var spec mcp.Spec
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "command??", &command, "url??", &spec.URL, "name??", &spec.Name,
		"env??", &env, "headers??", &headers, "timeout_s??", &timeout, "prefix??", &spec.Prefix); err != nil {
		return nil, err
	}
	var err error
	if command != starlark.None {
		if spec.Command, err = stringsOf(command); err != nil {
			return nil, fmt.Errorf("%s: for parameter command: %w", b.Name(), err)
		}
		if spec.Command == nil {
			spec.Command = []string{}
		}
	}
	if spec.Timeout, err = seconds(b.Name(), "timeout_s", timeout, mcp.DefaultTimeout); err != nil {
		return nil, err
	}
	if spec.Env, spec.SecretEnv, err = secretMap(b.Name(), "env", env); err != nil {
		return nil, err
	}
	if spec.Headers, spec.SecretHeaders, err = secretMap(b.Name(), "headers", headers); err != nil {
		return nil, err
	}
	st, err := stateOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	p, err := policyOf(thread, b.Name())
	if err != nil {
		return nil, err
	}
	redactPassedEnv(thread, spec, p)
	srv, err := mcp.Connect(vm.ContextOf(thread), spec, p)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	st.AtClose(srv.Close)
	v := &mcpServerValue{srv: srv}
	tools := make([]starlark.Value, 0, len(srv.Tools()))
	for _, t := range srv.Tools() {
		tools = append(tools, &mcpToolValue{t: t})
	}
	v.tools = starlark.NewList(tools)
	v.tools.Freeze()
	return v, nil
}

// redactPassedEnv has the store redact, as secrets, the values of the
// variables of skein's environment that a stdio server is passed (those
// --allow-env names).
func redactPassedEnv(thread *starlark.Thread, spec mcp.Spec, p *workspace.Policy) {
	if spec.Command == nil {
		return
	}
	redactor := redactorOf(thread)
	for k, v := range p.AllowedEnviron() {
		redactor.Add(k, v)
	}
}

// mcpServerValue is a connected MCP server: what mcp_server returns.
type mcpServerValue struct {
	srv   *mcp.Server
	tools *starlark.List
}

var (
	_ starlark.HasAttrs = (*mcpServerValue)(nil)
	_ Tool              = (*mcpToolValue)(nil)
	_ starlark.HasAttrs = (*mcpToolValue)(nil)
	_ agent.ContentTool = (*mcp.Tool)(nil)
	_ agent.SchemaTool  = (*mcp.Tool)(nil)
)

func (v *mcpServerValue) String() string        { return fmt.Sprintf("<mcp_server %s>", v.srv.Name()) }
func (v *mcpServerValue) Type() string          { return "mcp_server" }
func (v *mcpServerValue) Freeze()               {}
func (v *mcpServerValue) Truth() starlark.Bool  { return true }
func (v *mcpServerValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: mcp_server") }

// Attr exposes name, tools, call and close.
func (v *mcpServerValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(v.srv.Name()), nil
	case "tools":
		return v.tools, nil
	case "call":
		return starlark.NewBuiltin("call", v.call), nil
	case "close":
		return starlark.NewBuiltin("close", v.close), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (v *mcpServerValue) AttrNames() []string { return []string{"call", "close", "name", "tools"} }

// call is .call(tool, args=None): the result as {text, data, images}
// with known secrets redacted; a result with isError fails.
func (v *mcpServerValue) call(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "mcp_server.call"
	var name string
	var arguments starlark.Value = starlark.None
	if err := starlark.UnpackArgs(fn, args, kwargs, "tool", &name, "args??", &arguments); err != nil {
		return nil, err
	}
	in := map[string]any{}
	if arguments != starlark.None {
		x, err := vm.FromStarlark(arguments, "args")
		if err != nil {
			return nil, fail(fn, err)
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter args: got %s, want dict", fn, arguments.Type())
		}
		in = m
	}
	r, err := v.srv.Call(vm.ContextOf(thread), name, in, nil)
	redactor := redactorOf(thread)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", fn, redactor.Redact(err.Error()))
	}
	images := make([]starlark.Value, 0)
	for _, img := range r.Images() {
		images = append(images, vm.ToStarlark(map[string]any{"media_type": img.MediaType, "data": img.Data}))
	}
	out := starlark.NewDict(3)
	out.SetKey(starlark.String("text"), starlark.String(redactor.Redact(r.Text())))
	out.SetKey(starlark.String("data"), vm.ToStarlark(redactor.RedactValue(r.Data)))
	out.SetKey(starlark.String("images"), starlark.NewList(images))
	return out, nil
}

func (v *mcpServerValue) close(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs("mcp_server.close", args, kwargs); err != nil {
		return nil, err
	}
	v.srv.Close()
	return starlark.None, nil
}

// mcpToolValue is one tool of an MCP server, usable in tools=[...].
type mcpToolValue struct{ t *mcp.Tool }

func (v *mcpToolValue) String() string        { return fmt.Sprintf("<tool %s>", v.t.Name()) }
func (v *mcpToolValue) Type() string          { return "tool" }
func (v *mcpToolValue) Freeze()               {}
func (v *mcpToolValue) Truth() starlark.Bool  { return true }
func (v *mcpToolValue) Hash() (uint32, error) { return starlark.String(v.t.Name()).Hash() }

// ToolSpec returns the tool's name, description and input schema.
func (v *mcpToolValue) ToolSpec() llm.ToolSpec { return v.t.Spec() }

// Bind returns the MCP tool itself: it runs on no thread.
func (v *mcpToolValue) Bind(*starlark.Thread) agent.Tool { return v.t }

// origin names where the tool comes from, for a clash of names.
func (v *mcpToolValue) origin() string { return "mcp server '" + v.t.Server().Name() + "'" }

// Attr exposes name, description, parameters and server.
func (v *mcpToolValue) Attr(name string) (starlark.Value, error) {
	if name == "server" {
		return starlark.String(v.t.Server().Name()), nil
	}
	return specAttr(v.t.Spec(), name), nil
}

// AttrNames lists the attributes.
func (v *mcpToolValue) AttrNames() []string { return append(specAttrNames(), "server") }

// mcpServerTools connects the MCP servers of an agent's mcp_servers
// (settings as mcp.ParseSettings reads them), each once for the run
// through the VM's pool, and returns the tools they grant: those named
// in names when names lists any of them, else all of them. rest is names
// without the MCP tools' names, for the caller to resolve.
func mcpServerTools(thread *starlark.Thread, agentName string, servers map[string]any, names []string) (tools []Tool, rest []string, err error) {
	st, err := vm.StateOf(thread)
	if err != nil {
		return nil, nil, err
	}
	p, err := vm.WorkspaceOf(thread)
	if err != nil {
		return nil, nil, err
	}
	var all []Tool
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		settings, ok := servers[name].(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("mcp server '%s': got %s, want a map of settings", name, jsonvalue.TypeName(servers[name]))
		}
		spec, err := mcp.ParseSettings(name, settings, func(v string) (workspace.Secret, error) { return lookupSecret(thread, v) })
		if err != nil {
			return nil, nil, err
		}
		redactPassedEnv(thread, spec, p)
		key, err := jsonvalue.Encode(map[string]any{"agent": agentName, "server": name, "settings": settings, "policy": p.String()})
		if err != nil {
			return nil, nil, err
		}
		srv, err := st.MCP.Connect(vm.ContextOf(thread), string(key), spec, p)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range srv.Tools() {
			all = append(all, &mcpToolValue{t: t})
		}
	}
	named := map[string]bool{}
	for _, n := range names {
		named[n] = true
	}
	var picked []Tool
	mcpNames := map[string]bool{}
	for _, t := range all {
		name := t.ToolSpec().Name
		mcpNames[name] = true
		if named[name] {
			picked = append(picked, t)
		}
	}
	if len(picked) == 0 {
		picked = all
	}
	for _, n := range names {
		if !mcpNames[n] {
			rest = append(rest, n)
		}
	}
	return picked, rest, nil
}
