package vm

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The REPL core: reading one input at a time from a line source,
// evaluating it on a State with globals that persist across inputs, and
// completion candidates. The terminal, prompts, signals and meta commands
// belong to the caller (cmd/skein's `repl`).
//
// It follows go.starlark.net/repl with its gaps fixed: each input runs
// under its own context through State.Begin, so cancelling it stops a
// Starlark loop and any blocking builtin; the project dialect is used; a
// line the parser read past the end of a statement is kept for the next
// input instead of being lost; end of input completes a pending compound
// statement; and a bare expression's value is bound to `_`.

// REPLFile is the file name REPL inputs are compiled as; it appears in
// their tracebacks.
const REPLFile = "<stdin>"

// REPL evaluates inputs on one State. Globals persist from one input to
// the next. A REPL is used by one goroutine at a time; Complete must not
// run concurrently with Eval.
type REPL struct {
	state   *State
	globals starlark.StringDict
	opts    *syntax.FileOptions
	file    string   // REPLFile inside Root, for load()
	pending []string // lines read past the end of the previous input
	eof     bool     // the line source reported io.EOF
	last    string   // the source of the last input read, see LastSource
}

// Input is one unit read by REPL.Read: a compound statement (a def, if,
// for or while with its body, or a line of simple statements), or a meta
// command.
type Input struct {
	// Meta is set when the input is a meta command: a line whose first
	// non-blank character is ':' (Starlark code never starts so),
	// trimmed, such as ":help".
	Meta string
	file *syntax.File
	src  string
}

// Source is the input's text as typed: its lines (indentation included)
// without the blank lines that ended it or the lines read past it, and
// without a final newline; a meta command's trimmed line.
func (in *Input) Source() string { return in.src }

// LastSource is the text of the input the last Read consumed, as
// Input.Source gives it, also when Read returned a syntax error (the
// lines of the bad input, so a line editor can keep them in its history
// for the user to fix); "" after an error of the line source (Ctrl-C
// while typing) or the end of input.
func (r *REPL) LastSource() string { return r.last }

// sourceOf joins lines into an input's source.
func sourceOf(lines []string) string {
	return strings.TrimRight(strings.Join(lines, ""), "\n")
}

// Empty reports whether the input has nothing to run (a comment line).
func (in *Input) Empty() bool {
	return in.Meta == "" && (in.file == nil || len(in.file.Stmts) == 0)
}

// NewREPL returns a REPL on st. Its globals start as st's predeclared
// names; load() inside inputs resolves against st.Root.
func NewREPL(st *State) *REPL {
	globals := make(starlark.StringDict, len(st.predeclared))
	for k, v := range st.predeclared {
		globals[k] = v
	}
	opts := Dialect()
	// load() binds globally in the REPL, so loaded names outlive the input.
	opts.LoadBindsGlobally = true
	file := filepath.Join(st.Root, REPLFile)
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, st.Root); err == nil && !strings.HasPrefix(rel, "..") {
			file = filepath.Join(rel, REPLFile) // tracebacks of loaded files stay short
		}
	}
	return &REPL{state: st, globals: globals, opts: opts, file: file}
}

// Globals returns the REPL's global names (the predeclared ones
// included). The caller must not modify the result.
func (r *REPL) Globals() starlark.StringDict { return r.globals }

// Read reads one input. next returns the next line of input (with or
// without its newline); continued is false for the first line of an input
// and true for continuation lines, so the caller can choose the prompt.
// Blank lines before an input are skipped. A compound statement ends with
// a blank line, or with a line that is not part of it (that line starts
// the next input); at the end of input (next returning io.EOF) a pending
// statement is completed. Read returns io.EOF when there is no more input,
// and any other error of next as is (readline's interrupt, for one), the
// partial input being discarded. A syntax error is returned as a
// syntax.Error; the lines of the bad input are discarded.
func (r *REPL) Read(next func(continued bool) (string, error)) (*Input, error) {
	var (
		lines   []string // lines given to the parser
		nextErr error    // an error of next other than io.EOF
	)
	r.last = ""
	read := func() (string, error) {
		if len(r.pending) > 0 {
			line := r.pending[0]
			r.pending = r.pending[1:]
			return line, nil
		}
		if r.eof {
			r.eof = false // a later Read may use another source
			return "", io.EOF
		}
		line, err := next(len(lines) > 0)
		if errors.Is(err, io.EOF) {
			if line == "" {
				return "", io.EOF
			}
			r.eof, err = true, nil
		}
		if err != nil {
			return "", err
		}
		if !strings.HasSuffix(line, "\n") {
			line += "\n"
		}
		return line, nil
	}

	// The first line: skip blank ones, recognise meta commands.
	var first string
	for {
		line, err := read()
		if err != nil {
			return nil, err
		}
		if trimmed := strings.TrimSpace(line); trimmed != "" {
			if strings.HasPrefix(trimmed, ":") {
				r.last = trimmed
				return &Input{Meta: trimmed, src: trimmed}, nil
			}
			first = line
			break
		}
	}
	lines = append(lines, first)
	served, completed := false, false
	f, err := r.opts.ParseCompoundStmt(REPLFile, func() ([]byte, error) {
		if !served {
			served = true
			return []byte(first), nil
		}
		line, err := read()
		if errors.Is(err, io.EOF) && !completed {
			// End of input completes a pending compound statement, as a
			// blank line would.
			line, err, completed = "\n", nil, true
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				nextErr = err
			}
			return nil, err
		}
		if !completed {
			lines = append(lines, line)
		}
		return []byte(line), nil
	})
	if nextErr != nil {
		return nil, nextErr
	}
	if err != nil {
		r.last = sourceOf(lines)
		var serr syntax.Error
		if errors.As(err, &serr) && serr.Msg == io.EOF.Error() {
			serr.Msg = "unexpected end of input"
			name := serr.Pos.Filename()
			serr.Pos = syntax.MakePosition(&name, int32(len(lines)+1), 1)
			return nil, serr
		}
		return nil, err
	}
	// The parser may have read lines past the statement (to see that a
	// def's body had ended): keep those that are not blank for the next
	// input.
	end := len(lines) // a comment line: everything read is consumed
	if n := len(f.Stmts); n > 0 {
		_, pos := f.Stmts[n-1].Span()
		end = int(pos.Line)
	}
	for i := end; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "" {
			r.pending = append(r.pending, lines[i:]...)
			break
		}
	}
	r.last = sourceOf(lines[:min(end, len(lines))])
	return &Input{file: f, src: r.last}, nil
}

// Eval runs one input under ctx on a new thread of the State (so the
// step limit counts per input): ctx's cancellation stops it, whether it
// is in a Starlark loop or in a builtin blocked on a model call or a
// tool. For a bare expression Eval returns its value and binds it to `_`
// unless it is None; otherwise it returns nil. Globals assigned before an
// error keep their new values. Meta inputs are the caller's: Eval does
// nothing with them.
func (r *REPL) Eval(ctx context.Context, in *Input) (starlark.Value, error) {
	if in == nil || in.Empty() || in.Meta != "" {
		return nil, nil
	}
	end := r.state.Begin(ctx)
	defer end()
	thread := r.state.NewThread("repl")
	defer r.state.Release(thread)
	SetFile(thread, r.file)
	if len(in.file.Stmts) == 1 {
		if stmt, ok := in.file.Stmts[0].(*syntax.ExprStmt); ok {
			v, err := starlark.EvalExprOptions(in.file.Options, thread, stmt.X, r.globals)
			if err != nil {
				return nil, r.state.hintUndefined(err, r.globals)
			}
			if v != starlark.None {
				r.globals["_"] = v
			}
			return v, nil
		}
	}
	return nil, r.state.hintUndefined(starlark.ExecREPLChunk(in.file, thread, r.globals), r.globals)
}

// keywords are completed like names.
const keywords = "and break continue def elif else for if in lambda load not or pass return while"

// Complete returns the completions of the name or attribute path that
// ends before (the text left of the cursor): whole words, sorted, and the
// length in bytes of the partial word they replace. A name completes
// against globals, builtins and keywords; `x.y.pa` completes against the
// attributes of x.y (values that have attributes: modules, structs,
// strings, lists, dicts, ...). Only names and attribute lookups are
// evaluated, never calls. Names starting with '_' are offered only when
// the partial word does.
func (r *REPL) Complete(before string) (words []string, partial int) {
	start := len(before)
	for start > 0 && isPathByte(before[start-1]) {
		start--
	}
	path := before[start:]
	if path == "" || path[0] == '.' || (path[0] >= '0' && path[0] <= '9') {
		return nil, 0
	}
	parts := strings.Split(path, ".")
	prefix := parts[len(parts)-1]
	var names []string
	if len(parts) == 1 {
		for name := range r.globals {
			names = append(names, name)
		}
		for name := range starlark.Universe {
			if _, shadowed := r.globals[name]; !shadowed {
				names = append(names, name)
			}
		}
		names = append(names, strings.Fields(keywords)...)
	} else {
		v, ok := r.lookup(parts[0])
		for _, attr := range parts[1 : len(parts)-1] {
			if !ok {
				break
			}
			v, ok = attrOf(v, attr)
		}
		if !ok {
			return nil, 0
		}
		if ha, isHA := v.(starlark.HasAttrs); isHA {
			names = ha.AttrNames()
		}
	}
	for _, name := range names {
		if strings.HasPrefix(name, prefix) && (!strings.HasPrefix(name, "_") || strings.HasPrefix(prefix, "_")) {
			words = append(words, name)
		}
	}
	sort.Strings(words)
	return words, len(prefix)
}

func (r *REPL) lookup(name string) (starlark.Value, bool) {
	if v, ok := r.globals[name]; ok {
		return v, true
	}
	v, ok := starlark.Universe[name]
	return v, ok
}

func attrOf(v starlark.Value, name string) (starlark.Value, bool) {
	ha, ok := v.(starlark.HasAttrs)
	if !ok {
		return nil, false
	}
	x, err := ha.Attr(name)
	return x, err == nil && x != nil
}

func isPathByte(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
