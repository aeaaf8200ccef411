package vm

import (
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Dialect returns the one set of file options used for scripts, loaded
// modules and the REPL: set, while, top-level if/for/while, global
// reassignment and recursion are enabled.
func Dialect() *syntax.FileOptions {
	return &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
}

// ExecFile runs the script filename (with source src, or read from the
// file when src is nil) on a new main thread and returns its globals. The
// caller brackets it with Begin for cancellation.
func (s *State) ExecFile(filename string, src any) (starlark.StringDict, error) {
	prog, err := s.Compile(filename, src)
	if err != nil {
		return nil, err
	}
	return s.ExecProgram(filename, prog)
}

// Compile parses and compiles the script filename (with source src, or
// read from the file when src is nil) against this VM's predeclared
// names. A program is immutable: it can run any number of times, at once,
// on every State with the same predeclared names (ExecProgram).
func (s *State) Compile(filename string, src any) (*starlark.Program, error) {
	_, prog, err := starlark.SourceProgramOptions(Dialect(), filename, src, s.predeclared.Has)
	return prog, s.hintUndefined(err, nil)
}

// ExecProgram runs a program compiled from filename on a new main thread
// and returns its globals, like ExecFile.
func (s *State) ExecProgram(filename string, prog *starlark.Program) (starlark.StringDict, error) {
	thread := s.NewThread("main")
	defer s.Release(thread)
	SetFile(thread, filename)
	return prog.Init(thread, s.predeclared)
}

// FormatError renders an error from Starlark execution the way the CLI
// prints it: the innermost traceback for evaluation errors (a callback's
// error keeps its own, deeper stack), file:line:col for syntax and resolve
// errors, and the plain message otherwise.
func FormatError(err error) string {
	var evalErr *starlark.EvalError
	if errors.As(err, &evalErr) {
		inner := evalErr
		for {
			var next *starlark.EvalError
			if !errors.As(inner.Unwrap(), &next) {
				break
			}
			inner = next
		}
		return backtrace(inner)
	}
	var syntaxErr syntax.Error
	if errors.As(err, &syntaxErr) {
		return syntaxErr.Error()
	}
	var resolveErrs resolve.ErrorList
	if errors.As(err, &resolveErrs) {
		lines := make([]string, len(resolveErrs))
		for i, e := range resolveErrs {
			lines[i] = fmt.Sprintf("%s: %s", e.Pos, e.Msg)
		}
		return strings.Join(lines, "\n")
	}
	return err.Error()
}

// backtrace renders an evaluation error like EvalError.Backtrace, without
// repeating a builtin's name when the message already starts with it
// (every skein builtin error does): "Error: agent_session_trim: ...".
func backtrace(e *starlark.EvalError) string {
	stack := e.CallStack
	label := "Error"
	if last := len(stack) - 1; last >= 0 && stack[last].Pos.Filename() == "<builtin>" {
		name := stack[last].Name
		stack = stack[:last]
		if !strings.HasPrefix(e.Msg, name+":") {
			label = "Error in " + name
		}
	}
	return fmt.Sprintf("%s%s: %s", stack, label, e.Msg)
}
