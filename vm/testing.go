package vm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/starlarktest"
)

// Starlark tests: files whose global functions named test_* are tests.
// Each test runs in a fresh VM (its own store, clock and ids, as the
// caller's NewState makes them) with the assert module of starlarktest
// predeclared. Every failed assertion is collected with its position;
// a test that asserts nothing is flagged.

// TestStatus is the outcome of one test.
type TestStatus string

// Test outcomes.
const (
	TestPass  TestStatus = "pass"
	TestFail  TestStatus = "fail"  // an assertion failed
	TestError TestStatus = "error" // the test (or its file) raised an error
	TestSkip  TestStatus = "skip"  // the test called skip()
)

// TestResult is the outcome of one test function.
type TestResult struct {
	File       string
	Name       string
	Status     TestStatus
	Started    time.Time // when the test started (zero for a file that could not be loaded)
	Duration   time.Duration
	Output     string    // what the test printed
	Failures   []Failure // failed assertions, in the order they failed
	Error      string    // the error traceback when Status is TestError
	SkipReason string
	Assertions int // assertions evaluated; 0 means the test checked nothing
}

// Failure is one failed assertion.
type Failure struct {
	// Pos is where the failing assert function was called, as
	// file:line:col ("" if it was not called through the assert module).
	Pos string
	// Assertion is the assert function that failed, e.g. "assert.eq".
	Assertion string
	// Message says what failed, e.g. "3 != 4".
	Message string
	// Traceback is the full report, from "Traceback (most recent call
	// last):" to the message.
	Traceback string
}

// String returns the failure on one line: "pos: assertion: message".
func (f Failure) String() string {
	if f.Pos == "" {
		return f.Message
	}
	return fmt.Sprintf("%s: %s: %s", f.Pos, f.Assertion, f.Message)
}

// TestRunner runs Starlark test files. It compiles each file once and
// runs the program in every test's fresh VM, so NewState must always
// return VMs with the same predeclared names. A TestRunner is safe for
// concurrent use and must not be copied after its first use.
type TestRunner struct {
	// NewState returns a fresh VM whose print output goes to stdout. Its
	// builtins must include TestBuiltins' names.
	NewState func(stdout io.Writer) (*State, error)
	// Timeout bounds each test (0: none).
	Timeout time.Duration
	// Context is the parent of every test's context (default Background).
	Context context.Context
	// Done, if not nil, is called after each test that got a VM, with the
	// VM (its store still open) and the result.
	Done func(st *State, res TestResult)

	mu       sync.Mutex
	programs map[string]*compiled // by file name
}

// compiled is a file's program, or why it does not compile.
type compiled struct {
	src  []byte
	prog *starlark.Program
	err  error
}

// program returns file's program compiled by st, compiling it on first
// use (and again if src changed).
func (r *TestRunner) program(st *State, file string, src []byte) (*starlark.Program, error) {
	r.mu.Lock()
	c, ok := r.programs[file]
	r.mu.Unlock()
	if ok && bytes.Equal(c.src, src) {
		return c.prog, c.err
	}
	c = &compiled{src: src}
	c.prog, c.err = st.Compile(file, src)
	r.mu.Lock()
	if r.programs == nil {
		r.programs = map[string]*compiled{}
	}
	r.programs[file] = c
	r.mu.Unlock()
	return c.prog, c.err
}

// exec runs file's top level in st.
func (r *TestRunner) exec(st *State, file string, src []byte) (starlark.StringDict, error) {
	prog, err := r.program(st, file, src)
	if err != nil {
		return nil, err
	}
	return st.ExecProgram(file, prog)
}

// Discover executes file once and returns its test functions' names in
// definition order.
func (r *TestRunner) Discover(file string, src []byte) ([]string, error) {
	var out bytes.Buffer
	st, err := r.NewState(&out)
	if err != nil {
		return nil, err
	}
	defer st.Store.Shutdown()
	defer st.Close()
	end := st.Begin(r.context())
	globals, err := r.exec(st, file, src)
	end()
	if err != nil {
		return nil, err
	}
	type test struct {
		name string
		line int32
	}
	var tests []test
	for name, v := range globals {
		if fn, ok := v.(*starlark.Function); ok && strings.HasPrefix(name, "test_") {
			tests = append(tests, test{name, fn.Position().Line})
		}
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].line < tests[j].line })
	names := make([]string, len(tests))
	for i, t := range tests {
		names[i] = t.name
	}
	return names, nil
}

func (r *TestRunner) context() context.Context {
	if r.Context != nil {
		return r.Context
	}
	return context.Background()
}

// Run runs one test function of file in a fresh VM.
func (r *TestRunner) Run(file string, src []byte, name string) (res TestResult) {
	res = TestResult{File: file, Name: name}
	var out bytes.Buffer
	start := time.Now()
	res.Started = start
	defer func() {
		res.Duration = time.Since(start)
		res.Output = out.String()
	}()
	st, err := r.NewState(&out)
	if err != nil {
		res.Status, res.Error = TestError, err.Error()
		return res
	}
	defer st.Store.Shutdown()
	defer st.Close()
	if r.Done != nil {
		defer func() { r.Done(st, res) }()
	}
	ctx := r.context()
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.Timeout, fmt.Errorf("timeout: the test exceeded %s", r.Timeout))
		defer cancel()
	}
	end := st.Begin(ctx)
	defer end()
	globals, err := r.exec(st, file, src)
	if err != nil {
		res.Status, res.Error = TestError, FormatError(err)
		return res
	}
	fn, ok := globals[name].(starlark.Callable)
	if !ok {
		res.Status, res.Error = TestError, fmt.Sprintf("no test function %s in %s", name, file)
		return res
	}
	thread := st.NewThread(name)
	defer st.Release(thread)
	SetFile(thread, file)
	rep := &reporter{}
	starlarktest.SetReporter(thread, rep)
	thread.SetLocal(assertCountKey, rep)
	_, err = starlark.Call(thread, fn, nil, nil)
	res.Failures = rep.failures
	res.Assertions = rep.count
	switch {
	case rep.skipped:
		res.Status, res.SkipReason = TestSkip, rep.skipReason
	case err != nil:
		res.Status, res.Error = TestError, FormatError(err)
	case len(rep.failures) > 0:
		res.Status = TestFail
	default:
		res.Status = TestPass
	}
	return res
}

// reporter collects a test's assertion failures and counts assertions.
type reporter struct {
	mu         sync.Mutex
	failures   []Failure
	count      int
	calls      []assertCall // the assert functions running, innermost last
	skipped    bool
	skipReason string
}

// assertCall is a running assert function and where it was called.
type assertCall struct {
	name, pos string
}

// Error records a failure reported by starlarktest: a traceback ending in
// "Error: <message>", attributed to the innermost running assert call.
func (r *reporter) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := Failure{Traceback: fmt.Sprint(args...)}
	f.Message = f.Traceback
	if _, msg, ok := strings.Cut(f.Traceback, "\nError: "); ok {
		f.Message = msg
	}
	if n := len(r.calls); n > 0 {
		f.Assertion, f.Pos = r.calls[n-1].name, r.calls[n-1].pos
	}
	r.failures = append(r.failures, f)
}

// enter counts an assertion and records it as running until leave.
func (r *reporter) enter(name, pos string) {
	r.mu.Lock()
	r.count++
	r.calls = append(r.calls, assertCall{name, pos})
	r.mu.Unlock()
}

func (r *reporter) leave() {
	r.mu.Lock()
	r.calls = r.calls[:len(r.calls)-1]
	r.mu.Unlock()
}

const assertCountKey = "skein.vm.assertions"

// errSkip stops a test that called skip().
type errSkip struct{ reason string }

func (e *errSkip) Error() string { return "skip: " + e.reason }

// TestBuiltins returns the names predeclared in test VMs: the assert
// module of starlarktest, wrapped so every assertion is counted, and
// skip(reason), which ends the test as skipped.
func TestBuiltins() (starlark.StringDict, error) {
	loaded, err := starlarktest.LoadAssertModule()
	if err != nil {
		return nil, err
	}
	orig, ok := loaded["assert"].(*starlarkstruct.Module)
	if !ok {
		return nil, fmt.Errorf("starlarktest assert module has an unexpected type %T", loaded["assert"])
	}
	members := starlark.StringDict{}
	for name, v := range orig.Members {
		fn, ok := v.(starlark.Callable)
		if !ok {
			members[name] = v
			continue
		}
		members[name] = starlark.NewBuiltin("assert."+name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if rep, ok := thread.Local(assertCountKey).(*reporter); ok {
				pos := ""
				if thread.CallStackDepth() > 1 {
					pos = thread.CallFrame(1).Pos.String()
				}
				rep.enter(b.Name(), pos)
				defer rep.leave()
			}
			return starlark.Call(thread, fn, args, kwargs)
		})
	}
	assert := &starlarkstruct.Module{Name: "assert", Members: members}
	assert.Freeze()
	skip := starlark.NewBuiltin("skip", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		reason := ""
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "reason?", &reason); err != nil {
			return nil, err
		}
		rep, ok := thread.Local(assertCountKey).(*reporter)
		if !ok {
			return nil, fmt.Errorf("skip: only tests can be skipped")
		}
		rep.mu.Lock()
		rep.skipped, rep.skipReason = true, reason
		rep.mu.Unlock()
		return nil, &errSkip{reason}
	})
	return starlark.StringDict{"assert": assert, "skip": skip}, nil
}
