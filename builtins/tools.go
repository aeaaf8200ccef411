package builtins

// Tool builtins.
//
//	tool(fn, name=None, description=None, parameters=None) -> tool
//
// A plain Starlark function is a tool too: its name is the tool name, the
// first paragraph of its docstring the description, an "Args:" section
// (Google style) the parameter descriptions; parameters without defaults
// are required. A parameter's JSON type comes from the type in its Args:
// line ("a (int): ..."; see docType), else from its default's type; with
// neither (or a None default) any JSON value is accepted. Every schema,
// inferred or given as parameters=, is compiled when the tool is made and
// enforced in full on each call (llm/schema).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/schema"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

func toolSpecs() []Spec {
	const area = "Agents"
	return []Spec{
		{"tool", "(fn, name=None, description=None, parameters=None) -> tool",
			"Wrap fn as an agent tool, overriding the name, description or JSON Schema inferred from it.", area, toolBuiltin},
	}
}

// Tool is a Starlark value usable in agent_loop(tools=[...]): tool(...)
// values and the built-in tools implement it. Bind returns the tool as the
// agent engine runs it on thread.
type Tool interface {
	starlark.Value
	ToolSpec() llm.ToolSpec
	Bind(thread *starlark.Thread) agent.Tool
}

// starlarkTool is a Starlark function with its tool spec: the value
// tool(...) returns, and what a plain function in tools= becomes.
type starlarkTool struct {
	fn   starlark.Callable
	spec llm.ToolSpec
	args *schema.Schema // spec.Parameters compiled
}

// newStarlarkTool makes a tool of fn, compiling its parameter schema: a
// schema that does not compile is an error here, not at the first call.
func newStarlarkTool(fn starlark.Callable, spec llm.ToolSpec) (*starlarkTool, error) {
	args, err := schema.Compile(spec.Parameters)
	if err != nil {
		return nil, fmt.Errorf("parameters: %v", err)
	}
	return &starlarkTool{fn: fn, spec: spec, args: args}, nil
}

var (
	_ Tool              = (*starlarkTool)(nil)
	_ starlark.HasAttrs = (*starlarkTool)(nil)
	_ agent.SchemaTool  = (*boundTool)(nil)
)

func (t *starlarkTool) String() string        { return fmt.Sprintf("<tool %s>", t.spec.Name) }
func (t *starlarkTool) Type() string          { return "tool" }
func (t *starlarkTool) Freeze()               { t.fn.Freeze() }
func (t *starlarkTool) Truth() starlark.Bool  { return true }
func (t *starlarkTool) Hash() (uint32, error) { return starlark.String(t.spec.Name).Hash() }

// ToolSpec returns the tool's name, description and schema.
func (t *starlarkTool) ToolSpec() llm.ToolSpec { return t.spec }

// Attr exposes name, description and parameters.
func (t *starlarkTool) Attr(name string) (starlark.Value, error) { return specAttr(t.spec, name), nil }

// AttrNames lists the attributes.
func (t *starlarkTool) AttrNames() []string { return specAttrNames() }

// specAttr is the attribute name of a tool value read from its spec, or
// nil if the spec has no such attribute.
func specAttr(spec llm.ToolSpec, name string) starlark.Value {
	switch name {
	case "name":
		return starlark.String(spec.Name)
	case "description":
		return starlark.String(spec.Description)
	case "parameters":
		return vm.ToStarlark(spec.Parameters)
	}
	return nil
}

// specAttrNames lists the attributes specAttr knows, sorted.
func specAttrNames() []string { return []string{"description", "name", "parameters"} }

// Bind returns the tool as the engine runs it: on thread.
func (t *starlarkTool) Bind(thread *starlark.Thread) agent.Tool {
	return &boundTool{tool: t, thread: thread}
}

type boundTool struct {
	tool   *starlarkTool
	thread *starlark.Thread
}

func (b *boundTool) Spec() llm.ToolSpec { return b.tool.spec }

// ArgsSchema returns the schema compiled when the tool was made.
func (b *boundTool) ArgsSchema() *schema.Schema { return b.tool.args }

func (b *boundTool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	kwargs := make([]starlark.Tuple, 0, len(call.Arguments))
	for _, k := range slices.Sorted(maps.Keys(call.Arguments)) {
		kwargs = append(kwargs, starlark.Tuple{starlark.String(k), vm.ToStarlark(call.Arguments[k])})
	}
	restore := vm.WithContext(b.thread, ctx)
	defer restore()
	v, err := starlark.Call(b.thread, b.tool.fn, nil, kwargs)
	if err != nil {
		return "", err
	}
	return ToolOutput(b.tool.spec.Name, v)
}

// ToolOutput renders a tool's return value as the result text: a string
// as is, None as "", anything else JSON-encoded. A value holding a secret
// is a fatal agent.ToolError.
func ToolOutput(name string, v starlark.Value) (string, error) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil
	case starlark.NoneType:
		return "", nil
	}
	x, err := vm.FromStarlark(v, "result")
	if err != nil {
		var se *vm.SecretError
		if errors.As(err, &se) {
			// Loud whatever tool_errors says: a secret never enters a transcript.
			return "", &agent.ToolError{Fatal: true, Err: fmt.Errorf("tool %s returned <secret %s> (at %s): a secret never enters a transcript", name, se.Name, se.Path)}
		}
		return "", fmt.Errorf("tool %s returned %s, want a string or a JSON-encodable value", name, v.Type())
	}
	data, err := json.Marshal(x)
	if err != nil {
		return "", fmt.Errorf("tool %s: %w", name, err)
	}
	return string(data), nil
}

func toolBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Callable
	var name, description string
	var params *starlark.Dict
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "fn", &fn, "name?", &name, "description?", &description, "parameters?", &params); err != nil {
		return nil, err
	}
	if t, ok := fn.(Tool); ok {
		return nil, fmt.Errorf("%s: %s is a tool already (pass it to tools= as it is)", b.Name(), t)
	}
	var spec llm.ToolSpec
	if f, ok := fn.(*starlark.Function); ok {
		spec = inferSpec(f)
	} else {
		spec = llm.ToolSpec{Name: fn.Name(), Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}
	}
	if name != "" {
		spec.Name = name
	}
	if description != "" {
		spec.Description = description
	}
	if params != nil {
		x, err := vm.FromStarlark(params, "parameters")
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		schema := x.(map[string]any)
		if t, ok := schema["type"]; ok && t != "object" {
			return nil, fmt.Errorf("%s: parameters must be a JSON Schema of type \"object\", got type %v", b.Name(), t)
		}
		spec.Parameters = schema
	}
	if err := checkToolName(spec.Name); err != nil {
		return nil, fail(b.Name(), err)
	}
	t, err := newStarlarkTool(fn, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return t, nil
}

// clashOrigins says where two tools of one name come from when either is
// an MCP server's (" (mcp server 'a' and mcp server 'b'; ...)"), else "".
func clashOrigins(a, b Tool) string {
	origin := func(t Tool) (string, bool) {
		if o, ok := t.(interface{ origin() string }); ok {
			return o.origin(), true
		}
		return "a script", false
	}
	oa, mcpA := origin(a)
	ob, mcpB := origin(b)
	if !mcpA && !mcpB {
		return ""
	}
	return fmt.Sprintf(" (%s and %s; pass prefix= to mcp_server to rename its tools)", oa, ob)
}

func checkToolName(name string) error {
	if name == "" || name == "lambda" {
		return fmt.Errorf("a tool needs a name (pass name= for a lambda)")
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("tool name %q may only have letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

// toolsFromStarlark converts the tools option: a list of functions and
// Tool values. Names must be unique.
func toolsFromStarlark(fn string, v starlark.Value) ([]Tool, error) {
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !ok {
		return nil, fmt.Errorf("%s: option 'tools': got %s, want list of functions or tools", fn, v.Type())
	}
	out := make([]Tool, 0, seq.Len())
	seen := map[string]Tool{}
	for i := 0; i < seq.Len(); i++ {
		var t Tool
		switch x := seq.Index(i).(type) {
		case Tool:
			t = x
		case *starlark.Function:
			if err := checkToolName(x.Name()); err != nil {
				return nil, fmt.Errorf("%s: tools[%d]: %w", fn, i, err)
			}
			st, err := newStarlarkTool(x, inferSpec(x))
			if err != nil {
				return nil, fmt.Errorf("%s: tools[%d]: %v", fn, i, err)
			}
			t = st
		default:
			return nil, fmt.Errorf("%s: tools[%d]: got %s, want a function or a tool", fn, i, x.Type())
		}
		name := t.ToolSpec().Name
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s: two tools are named %q%s", fn, name, clashOrigins(first, t))
		}
		seen[name] = t
		out = append(out, t)
	}
	return out, nil
}

// inferSpec builds a tool spec from a function's signature and docstring.
func inferSpec(fn *starlark.Function) llm.ToolSpec {
	description, argDocs, argTypes := parseDocstring(fn.Doc())
	props := map[string]any{}
	var required []any
	n := fn.NumParams()
	if fn.HasVarargs() {
		n--
	}
	if fn.HasKwargs() {
		n--
	}
	for i := 0; i < n; i++ {
		name, _ := fn.Param(i)
		dflt := fn.ParamDefault(i)
		prop := paramSchema(argTypes[name], dflt)
		if d := argDocs[name]; d != "" {
			prop["description"] = d
		}
		props[name] = prop
		if dflt == nil {
			required = append(required, name)
		}
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	if !fn.HasKwargs() {
		schema["additionalProperties"] = false
	}
	return llm.ToolSpec{Name: fn.Name(), Description: description, Parameters: schema}
}

// paramSchema is the schema of one inferred parameter: from its docstring
// type when that names a known type, else from its default's type, else
// no constraint. A None default also accepts null.
func paramSchema(docType string, dflt starlark.Value) map[string]any {
	prop, ok := typeSchema(docType)
	if !ok {
		prop = map[string]any{}
		if t := jsonTypeOf(dflt); t != "" {
			prop["type"] = t
		}
	}
	if dflt == starlark.None {
		prop = orNull(prop)
	}
	return prop
}

// jsonTypeOf maps a default value to a JSON Schema type ("" when there is
// no default or it is None: no constraint).
func jsonTypeOf(v starlark.Value) string {
	switch v.(type) {
	case starlark.String:
		return "string"
	case starlark.Int:
		return "integer"
	case starlark.Float:
		return "number"
	case starlark.Bool:
		return "boolean"
	case *starlark.List, starlark.Tuple:
		return "array"
	case *starlark.Dict:
		return "object"
	}
	return ""
}

// typeSchema is the schema of a docstring type: str, int, float, bool,
// list, dict (also Python's typing spellings: List, Dict, Any), element
// types list[T] and dict[str, T], unions "A | B", and Optional[T]. ok is
// false for an empty or unknown type, which then says nothing.
func typeSchema(t string) (map[string]any, bool) {
	t = strings.TrimSpace(t)
	if t == "" {
		return nil, false
	}
	if parts := splitTop(t, '|'); len(parts) > 1 {
		return unionSchema(parts)
	}
	if inner, ok := generic(t, "Optional"); ok {
		return unionSchema([]string{inner, "None"})
	}
	if inner, ok := generic(t, "Union"); ok {
		return unionSchema(splitTop(inner, ','))
	}
	for _, name := range []string{"list", "List", "tuple", "Tuple", "Sequence"} {
		if inner, ok := generic(t, name); ok {
			items := splitTop(inner, ',')
			s := map[string]any{"type": "array"}
			if len(items) == 1 {
				if is, ok := typeSchema(items[0]); ok {
					s["items"] = is
				}
			}
			return s, true
		}
	}
	for _, name := range []string{"dict", "Dict", "Mapping"} {
		if inner, ok := generic(t, name); ok {
			s := map[string]any{"type": "object"}
			if kv := splitTop(inner, ','); len(kv) == 2 {
				if vs, ok := typeSchema(kv[1]); ok {
					s["additionalProperties"] = vs
				}
			}
			return s, true
		}
	}
	switch t {
	case "str", "string":
		return map[string]any{"type": "string"}, true
	case "int", "integer":
		return map[string]any{"type": "integer"}, true
	case "float", "number":
		return map[string]any{"type": "number"}, true
	case "bool", "boolean":
		return map[string]any{"type": "boolean"}, true
	case "list", "List", "tuple", "Tuple", "Sequence":
		return map[string]any{"type": "array"}, true
	case "dict", "Dict", "Mapping", "object":
		return map[string]any{"type": "object"}, true
	case "None", "NoneType", "null":
		return map[string]any{"type": "null"}, true
	case "any", "Any":
		return map[string]any{}, true
	}
	return nil, false
}

// unionSchema is the schema of a union: plain types merge into one "type"
// list (their other keywords kept); anything richer becomes anyOf. Any
// unknown member makes the union unknown.
func unionSchema(parts []string) (map[string]any, bool) {
	var members []map[string]any
	for _, p := range parts {
		m, ok := typeSchema(p)
		if !ok {
			return nil, false
		}
		if len(m) == 0 {
			return m, true // Any absorbs the rest
		}
		members = append(members, m)
	}
	var types []any
	merged := map[string]any{}
	for _, m := range members {
		tn, _ := m["type"].(string)
		for k, v := range m {
			if k == "type" {
				continue
			}
			if _, clash := merged[k]; clash {
				return map[string]any{"anyOf": anyOf(members)}, true
			}
			merged[k] = v
		}
		for _, seen := range types {
			if seen == tn {
				return map[string]any{"anyOf": anyOf(members)}, true
			}
		}
		types = append(types, tn)
	}
	merged["type"] = types
	return merged, true
}

func anyOf(members []map[string]any) []any {
	out := make([]any, len(members))
	for i, m := range members {
		out[i] = m
	}
	return out
}

// orNull makes a parameter schema accept null too.
func orNull(prop map[string]any) map[string]any {
	switch t := prop["type"].(type) {
	case string:
		if t != "null" {
			prop["type"] = []any{t, "null"}
		}
	case []any:
		for _, x := range t {
			if x == "null" {
				return prop
			}
		}
		prop["type"] = append(t, "null")
	}
	return prop
}

// generic returns the inside of "name[inner]".
func generic(t, name string) (string, bool) {
	if !strings.HasPrefix(t, name+"[") || !strings.HasSuffix(t, "]") {
		return "", false
	}
	return t[len(name)+1 : len(t)-1], true
}

// splitTop splits s at sep outside brackets.
func splitTop(s string, sep rune) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case sep:
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

// parseDocstring splits a Google-style docstring into its first paragraph
// and, from an "Args:" section, each argument's description and the type
// written in parentheses after its name ("a (int): ...").
func parseDocstring(doc string) (description string, args, types map[string]string) {
	lines := strings.Split(strings.TrimSpace(doc), "\n")
	var first []string
	i := 0
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		l := strings.TrimSpace(lines[i])
		if l == "Args:" || l == "Arguments:" {
			break
		}
		first = append(first, l)
	}
	args = map[string]string{}
	types = map[string]string{}
	for ; i < len(lines); i++ {
		if t := strings.TrimSpace(lines[i]); t == "Args:" || t == "Arguments:" {
			break
		}
	}
	argIndent := -1
	current := ""
	for i++; i < len(lines); i++ {
		line := lines[i]
		t := strings.TrimSpace(line)
		if t == "" {
			current = ""
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		if argIndent < 0 {
			argIndent = indent
		}
		if indent < argIndent {
			break // the next section (Returns:, ...)
		}
		if indent == argIndent && isArgLine(t) {
			name, desc, _ := strings.Cut(t, ":")
			name = strings.TrimSpace(name)
			if j := strings.Index(name, "("); j > 0 {
				typ := strings.TrimSuffix(strings.TrimSpace(name[j+1:]), ")")
				// "x (int, optional)": the type is before the comma.
				if k := strings.LastIndex(typ, ", optional"); k >= 0 {
					typ = typ[:k]
				}
				name = strings.TrimSpace(name[:j])
				types[name] = typ
			}
			current = name
			args[name] = strings.TrimSpace(desc)
			continue
		}
		if indent > argIndent && current != "" {
			args[current] = strings.TrimSpace(args[current] + " " + t)
			continue
		}
		break
	}
	return strings.Join(first, " "), args, types
}

// isArgLine reports whether a docstring line starts an argument entry:
// "name: text" or "name (type): text".
func isArgLine(t string) bool {
	name, _, ok := strings.Cut(t, ":")
	if !ok {
		return false
	}
	name = strings.TrimSpace(name)
	if j := strings.Index(name, "("); j > 0 && strings.HasSuffix(name, ")") {
		name = strings.TrimSpace(name[:j])
	}
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '*') {
			return false
		}
	}
	return true
}
