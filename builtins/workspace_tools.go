package builtins

// Built-in agent tools: ready-made values for agent_loop(tools=[...]).
//
//	tools.read_file     read a text file (path, offset=1, limit=2000)
//	tools.write_file    create or overwrite a file (path, content)
//	tools.list_dir      list a directory (path=".", glob)
//	tools.search        regexp search over files (pattern, path=".", glob)
//	tools.run_command   run an allowlisted command (argv, stdin, timeout_s, cwd)
//	tools.http_get      GET an allowlisted URL (url, headers)
//
// Each is a tool value with a description and a JSON Schema for the
// model. Calling one returns a configured copy:
//
//	tools.write_file(approve=fn)  # fn(tool_name, args) -> bool before each call
//
// Every call goes through the workspace policy in force when it runs (the
// loop's narrowed one when agent_loop got workspace=...). Whatever fails
// (a refused path or command, a missing file, a declined approval)
// becomes an error result the model sees, even with tool_errors="raise";
// only an error raised by the approve function itself follows
// tool_errors, like any error of Starlark code.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// Limits of the built-in tools: what a model is given at once.
const (
	readFileLines    = 2000      // default limit of read_file
	readFileMaxBytes = 100 << 10 // read_file returns at most this much
	listDirMax       = 1000      // entries list_dir shows
	toolMaxOutput    = 32 << 10  // run_command: per stream; http_get: body
	toolMaxTimeout   = 3600      // run_command: seconds
)

// builtinTool is one of the built-in agent tools.
type builtinTool struct {
	name string
	// schema makes the tool's specification on first use: every run makes
	// every built-in tool (Predeclared), few runs give one to a model.
	schema *lazySpec
	// describe, if set, adds to the description what the policy in force
	// at bind time allows (the commands, the hosts).
	describe func(p *workspace.Policy) string
	run      func(thread *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error)
	approve  starlark.Callable // nil: no approval asked
}

// lazySpec is a built-in tool's specification, made once on first use.
type lazySpec struct {
	once  sync.Once
	build func(name string) llm.ToolSpec
	spec  llm.ToolSpec
	built bool
}

func (l *lazySpec) get(name string) llm.ToolSpec {
	l.once.Do(func() { l.spec, l.built = l.build(name), true })
	return l.spec
}

// spec returns the tool's name, description and schema.
func (t *builtinTool) spec() llm.ToolSpec { return t.schema.get(t.name) }

var (
	_ Tool              = (*builtinTool)(nil)
	_ starlark.HasAttrs = (*builtinTool)(nil)
	_ starlark.Callable = (*builtinTool)(nil)
)

func (t *builtinTool) String() string {
	if t.approve != nil {
		return fmt.Sprintf("<tool %s (approval required)>", t.name)
	}
	return fmt.Sprintf("<tool %s>", t.name)
}
func (t *builtinTool) Type() string          { return "tool" }
func (t *builtinTool) Truth() starlark.Bool  { return true }
func (t *builtinTool) Hash() (uint32, error) { return starlark.String(t.name).Hash() }
func (t *builtinTool) Freeze() {
	if t.approve != nil {
		t.approve.Freeze()
	}
}

// Name is the tool's Starlark name, for call errors.
func (t *builtinTool) Name() string { return "tools." + t.name }

// ToolSpec returns the tool's name, description and schema.
func (t *builtinTool) ToolSpec() llm.ToolSpec { return t.spec() }

// Attr exposes name, description, parameters and approve.
func (t *builtinTool) Attr(name string) (starlark.Value, error) {
	if name != "approve" {
		return specAttr(t.spec(), name), nil
	}
	if t.approve == nil {
		return starlark.None, nil
	}
	return t.approve, nil
}

// AttrNames lists the attributes.
func (t *builtinTool) AttrNames() []string {
	return append([]string{"approve"}, specAttrNames()...)
}

// CallInternal returns a copy of the tool configured by the keyword
// arguments: approve=fn asks fn(tool_name, args) before every call
// (None removes the approval).
func (t *builtinTool) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var approve starlark.Value = starlark.None
	if err := starlark.UnpackArgs(t.Name(), args, kwargs, "approve??", &approve); err != nil {
		return nil, err
	}
	c := *t
	switch fn := approve.(type) {
	case starlark.NoneType:
		c.approve = nil
	case starlark.Callable:
		if err := vm.CheckArity(fn, "tool_name", "args"); err != nil {
			return nil, fmt.Errorf("%s: approve: %w", t.Name(), err)
		}
		c.approve = fn
	default:
		return nil, fmt.Errorf("%s: for parameter approve: got %s, want callable or None", t.Name(), approve.Type())
	}
	return &c, nil
}

// Bind returns the tool as the engine runs it on thread. Its description
// says what the policy in force now allows.
func (t *builtinTool) Bind(thread *starlark.Thread) agent.Tool {
	spec := t.spec()
	if t.describe != nil {
		if p, err := vm.WorkspaceOf(thread); err == nil {
			spec.Description += " " + t.describe(p)
		}
	}
	return &boundBuiltinTool{tool: t, spec: spec, thread: thread}
}

type boundBuiltinTool struct {
	tool   *builtinTool
	spec   llm.ToolSpec
	thread *starlark.Thread
}

func (b *boundBuiltinTool) Spec() llm.ToolSpec { return b.spec }

// Run asks for approval if configured, then runs the call under the
// policy in force. Its failures are agent.ToolErrors the model sees.
func (b *boundBuiltinTool) Run(ctx context.Context, call message.ToolCall) (string, error) {
	restore := vm.WithContext(b.thread, ctx)
	defer restore()
	name := b.tool.name
	if b.tool.approve != nil {
		args := vm.ToStarlark(map[string]any(call.Arguments))
		v, err := starlark.Call(b.thread, b.tool.approve, starlark.Tuple{starlark.String(name), args}, nil)
		if err != nil {
			return "", err
		}
		ok, isBool := v.(starlark.Bool)
		if !isBool {
			return "", fmt.Errorf("%s: approve returned %s, want bool", b.tool.Name(), v.Type())
		}
		if !ok {
			return "", &agent.ToolError{Err: &agent.RefusedError{Action: "call " + name, Rule: "approve",
				Err: fmt.Errorf("%s: the call was not approved", name)}}
		}
	}
	p, err := vm.WorkspaceOf(b.thread)
	if err != nil {
		return "", err
	}
	out, err := b.tool.run(b.thread, p, call.Arguments)
	if err != nil {
		return "", &agent.ToolError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	return out, nil
}

// builtinToolValues are the tools module's members.
func builtinToolValues() []Value {
	const area = "Agent tools"
	var out []Value
	for _, t := range builtinTools() {
		summary := toolSummary(t.name) + " `" + t.Name() + "(approve=fn)` is a copy that asks fn(tool, args) -> bool first."
		out = append(out, Value{Name: t.Name(), Summary: summary, Area: area, Value: t})
	}
	return out
}

// toolSummary is the reference's line of a built-in tool.
func toolSummary(name string) string {
	switch name {
	case "read_file":
		return "Tool (path, offset, limit): read lines of a text file in read scope."
	case "write_file":
		return "Tool (path, content): create or overwrite a file in write scope."
	case "list_dir":
		return "Tool (path, glob): list a directory in read scope."
	case "search":
		return "Tool (pattern, path, glob): regexp search over the files in read scope, at most 100 matches."
	case "run_command":
		return "Tool (argv, stdin, timeout_s, cwd): run an allowlisted command, no shell; exit code, stdout and stderr."
	case "http_get":
		return "Tool (url, headers): GET an allowlisted URL; status, content type and body."
	}
	return ""
}

// builtinTools returns fresh values of every built-in tool.
func builtinTools() []*builtinTool {
	return []*builtinTool{
		{name: "read_file", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				"Read a text file of the workspace. Returns up to `limit` lines starting at line `offset` (1-based); "+
					"a note at the end says how to read on when there is more. Relative paths are relative to the workspace root.",
				props{"path": str("The file's path."),
					"offset": integer("The first line to return, 1-based (default 1).", 1),
					"limit":  integer(fmt.Sprintf("The most lines to return (default %d).", readFileLines), 1)},
				"path")
		}},
			run: readFileTool},
		{name: "write_file", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				"Create or overwrite a file of the workspace with `content`, the whole new text of the file. "+
					"Missing parent directories are created. Relative paths are relative to the workspace root.",
				props{"path": str("The file's path."), "content": str("The complete new content of the file.")},
				"path", "content")
		}},
			run: writeFileTool},
		{name: "list_dir", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				"List a directory of the workspace, one entry per line: directories end with a slash, files that are not empty show their size. "+
					"Relative paths are relative to the workspace root.",
				props{"path": str("The directory (default \".\", the workspace root)."),
					"glob": str("Only names matching this pattern, e.g. \"*.go\".")})
		}},
			run: listDirTool},
		{name: "search", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				fmt.Sprintf("Search the files under a directory (or one file) of the workspace for lines matching a regular expression (RE2 syntax). "+
					"Returns one `file:line: text` line per match, at most %d; binary files and .git are skipped.", workspace.DefaultMaxResults),
				props{"pattern": str("The regular expression, e.g. \"func [A-Z][A-Za-z]*\" or \"TODO|FIXME\"."),
					"path": str("The directory or file to search (default \".\", the workspace root)."),
					"glob": str("Only files whose name matches this pattern, e.g. \"*.go\".")},
				"pattern")
		}},
			run: searchTool},
		{name: "run_command", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				"Run a program in the workspace root and return its exit code, stdout and stderr. There is no shell: "+
					"`argv` is the program and its arguments, so pipes, redirections and globs do not work.",
				props{"argv": strList("The program and its arguments, e.g. [\"go\", \"test\", \"./...\"]."),
					"stdin":     str("Text for the program's standard input."),
					"timeout_s": number(fmt.Sprintf("Seconds before the program is killed (default %d).", int(workspace.DefaultTimeout.Seconds())), toolMaxTimeout),
					"cwd":       str("The directory to run in, relative to the workspace root.")},
				"argv")
		}},
			describe: func(p *workspace.Policy) string { return allowedText("programs", p.AllowCmds()) },
			run:      runCommandTool},
		{name: "http_get", schema: &lazySpec{build: func(name string) llm.ToolSpec {
			return spec(name,
				"Fetch a URL with an HTTP GET and return the status, the content type and the body.",
				props{"url": str("An absolute http or https URL."),
					"headers": map[string]any{"type": "object", "description": "Request headers.", "additionalProperties": map[string]any{"type": "string"}}},
				"url")
		}},
			describe: func(p *workspace.Policy) string { return allowedText("hosts", p.AllowNet()) },
			run:      httpGetTool},
	}
}

// allowedText tells the model what the policy allows.
func allowedText(what string, allowed []string) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("No %s are allowed in this run, so every call will be refused.", what)
	}
	return fmt.Sprintf("Allowed %s: %s.", what, strings.Join(allowed, ", "))
}

// JSON Schema helpers.
type props = map[string]any

func spec(name, description string, properties props, required ...string) llm.ToolSpec {
	schema := map[string]any{"type": "object", "properties": properties, "additionalProperties": false}
	if len(required) > 0 {
		req := make([]any, len(required))
		for i, r := range required {
			req[i] = r
		}
		schema["required"] = req
	}
	return llm.ToolSpec{Name: name, Description: description, Parameters: schema}
}

func str(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

func integer(description string, minimum int) map[string]any {
	return map[string]any{"type": "integer", "description": description, "minimum": int64(minimum)}
}

func number(description string, maximum int) map[string]any {
	return map[string]any{"type": "number", "description": description, "exclusiveMinimum": int64(0), "maximum": int64(maximum)}
}

func strList(description string) map[string]any {
	return map[string]any{"type": "array", "description": description, "items": map[string]any{"type": "string"}, "minItems": int64(1)}
}

// Argument accessors: the engine has checked the arguments against the
// schema, so a present argument has its declared type.
func strArg(args map[string]any, key, dflt string) string {
	if s, ok := args[key].(string); ok {
		return s
	}
	return dflt
}

func intArg(args map[string]any, key string, dflt int) int {
	switch n := args[key].(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return dflt
}

func readFileTool(_ *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	path := strArg(args, "path", "")
	offset, limit := intArg(args, "offset", 1), intArg(args, "limit", readFileLines)
	f, err := p.OpenRead(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 8192)
	if head, _ := r.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return "", fmt.Errorf("%q is a binary file", path)
	}
	var b strings.Builder
	n, shown := 0, 0
	for {
		line, err := readLine(r, readFileMaxBytes)
		if line != "" {
			n++
			if n >= offset {
				if shown == limit || shown > 0 && b.Len()+len(line) > readFileMaxBytes {
					fmt.Fprintf(&b, "\n[lines %d-%d shown; more follow: call read_file with offset=%d]", offset, n-1, n)
					return b.String(), nil
				}
				b.WriteString(line)
				shown++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %q: %w", path, err)
		}
	}
	switch {
	case n == 0:
		return "(empty file)", nil
	case shown == 0:
		return fmt.Sprintf("(the file has %d lines; offset %d is past the end)", n, offset), nil
	}
	return b.String(), nil
}

// readLine reads one line, newline included, keeping at most max bytes
// of it (cut at a character boundary and marked) and skipping the rest.
// At the end of the input it returns io.EOF with the last line, if any.
func readLine(r *bufio.Reader, max int) (string, error) {
	var buf []byte
	cut := false
	for {
		chunk, err := r.ReadSlice('\n')
		if room := max - len(buf); len(chunk) > room {
			chunk, cut = chunk[:room], true
		}
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if cut {
			// drop a character the cut split
			return strings.ToValidUTF8(string(buf), "") + " [line cut]\n", err
		}
		return string(buf), err
	}
}

func writeFileTool(_ *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	path, content := strArg(args, "path", ""), strArg(args, "content", "")
	if err := p.WriteFile(path, []byte(content)); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(content), path), nil
}

func listDirTool(_ *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	entries, err := p.ListEntries(strArg(args, "path", "."), strArg(args, "glob", ""))
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "(no entries)", nil
	}
	var b strings.Builder
	for i, e := range entries {
		if i == listDirMax {
			fmt.Fprintf(&b, "[%d more entries not shown; narrow with glob]\n", len(entries)-i)
			break
		}
		switch {
		case e.IsDir:
			fmt.Fprintf(&b, "%s/\n", e.Name)
		case e.Size > 0:
			fmt.Fprintf(&b, "%s (%d bytes)\n", e.Name, e.Size)
		default: // empty, or not a regular file (a symbolic link)
			fmt.Fprintf(&b, "%s\n", e.Name)
		}
	}
	return b.String(), nil
}

func searchTool(thread *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	res, err := p.Search(vm.ContextOf(thread), strArg(args, "pattern", ""), strArg(args, "path", "."), strArg(args, "glob", ""), 0)
	if err != nil {
		return "", err
	}
	if len(res.Matches) == 0 {
		return "no matches", nil
	}
	return res.String(), nil
}

func runCommandTool(thread *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	r := execRequest{opts: workspace.RunOptions{
		Stdin: strArg(args, "stdin", ""), Dir: strArg(args, "cwd", ""), MaxOutput: toolMaxOutput,
	}}
	argv, _ := args["argv"].([]any)
	for _, a := range argv {
		s, _ := a.(string)
		r.argv = append(r.argv, s)
	}
	if f, ok := args["timeout_s"].(float64); ok {
		r.opts.Timeout = time.Duration(f * float64(time.Second))
	} else if n, ok := args["timeout_s"].(int64); ok {
		r.opts.Timeout = time.Duration(n) * time.Second
	}
	res, err := runCommand(thread, p, r)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if res.TimedOut {
		timeout := r.opts.Timeout
		if timeout <= 0 {
			timeout = workspace.DefaultTimeout
		}
		fmt.Fprintf(&b, "timed out after %s and was killed\n", timeout)
	} else {
		fmt.Fprintf(&b, "exit code %d\n", res.Code)
	}
	for _, s := range []struct{ name, text string }{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if s.text == "" {
			fmt.Fprintf(&b, "--- %s: empty\n", s.name)
			continue
		}
		fmt.Fprintf(&b, "--- %s:\n%s", s.name, s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String(), nil
}

func httpGetTool(thread *starlark.Thread, p *workspace.Policy, args map[string]any) (string, error) {
	r := workspace.HTTPRequest{Method: http.MethodGet, URL: strArg(args, "url", ""), MaxBody: toolMaxOutput, Headers: map[string]string{}}
	if h, ok := args["headers"].(map[string]any); ok {
		for k, v := range h {
			s, _ := v.(string)
			r.Headers[k] = s
		}
	}
	res, err := doHTTP(thread, p, r)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status %d\n", res.Status)
	if ct := res.Headers["content-type"]; ct != "" {
		fmt.Fprintf(&b, "content-type: %s\n", ct)
	}
	b.WriteString("\n")
	b.WriteString(res.Body)
	if res.Truncated {
		fmt.Fprintf(&b, "\n[body truncated to %d bytes]", toolMaxOutput)
	}
	return b.String(), nil
}
