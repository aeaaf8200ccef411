// Package builtins is skein's Starlark surface: every predeclared
// function scripts call, one file per area (sessions.go, agent.go,
// mock.go, tools.go, compact.go, ...). Builtins are thin: they unpack
// their arguments with starlark.UnpackArgs, call the Go package one layer
// down (sessions, agent, compact, llm) and convert the result.
//
// Every error a builtin raises starts with the builtin's name and a
// colon. The reference of all builtins, docs/builtins.md, is generated
// from Specs and checked by a test.
package builtins

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/vm"
)

// Spec describes one builtin.
type Spec struct {
	// Name is the Starlark name; a dotted name ("fs.read") is a member of
	// a module value ("fs").
	Name string
	// Signature is the call shape shown in the reference, without the name.
	Signature string
	// Summary is one line for the reference.
	Summary string
	// Area names the reference section (and the file) it belongs to.
	Area string
	Impl func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)
}

// Specs returns every builtin, grouped by area in reference order.
func Specs() []Spec {
	var all []Spec
	for _, area := range [][]Spec{sessionSpecs(), compactSpecs(), agentSpecs(), mcpSpecs(), mockSpecs(), controlSpecs(), workspaceSpecs(), workflowSpecs(), spawnSpecs(), evalSpecs(), agentDefSpecs()} {
		all = append(all, area...)
	}
	return all
}

// Value describes a predeclared value that is not a builtin function,
// such as the built-in agent tools (tools.read_file, ...).
type Value struct {
	// Name is the Starlark name; a dotted name is a module member.
	Name string
	// Signature is shown after the name in the reference ("" for none).
	Signature string
	// Summary is one line for the reference.
	Summary string
	// Area names the reference section it belongs to.
	Area string
	// Value is the value itself; Predeclared freezes it.
	Value starlark.Value
}

// Values returns every predeclared value that is not a builtin function,
// grouped by area in reference order, after the areas of Specs.
func Values() []Value {
	return builtinToolValues()
}

// Predeclared returns the builtins as predeclared names for vm.Options.
// Dotted names become members of frozen module values. Two builtins with
// one name are an error.
func Predeclared() (starlark.StringDict, error) {
	out := starlark.StringDict{}
	modules := map[string]starlark.StringDict{}
	seen := map[string]bool{}
	add := func(name string, v starlark.Value) error {
		if seen[name] {
			return fmt.Errorf("builtin %s is defined twice", name)
		}
		seen[name] = true
		if mod, member, ok := strings.Cut(name, "."); ok {
			if modules[mod] == nil {
				modules[mod] = starlark.StringDict{}
			}
			modules[mod][member] = v
			return nil
		}
		out[name] = v
		return nil
	}
	for _, s := range Specs() {
		if err := add(s.Name, starlark.NewBuiltin(s.Name, s.Impl)); err != nil {
			return nil, err
		}
	}
	for _, v := range Values() {
		v.Value.Freeze()
		if err := add(v.Name, v.Value); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(modules))
	for m := range modules {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		if _, clash := out[m]; clash {
			return nil, fmt.Errorf("module %s clashes with a builtin of that name", m)
		}
		mod := &starlarkstruct.Module{Name: m, Members: modules[m]}
		mod.Freeze()
		out[m] = mod
	}
	return out, nil
}

// stateOf returns the thread's VM state, with fn's name on the error.
func stateOf(thread *starlark.Thread, fn string) (*vm.State, error) {
	st, err := vm.StateOf(thread)
	if err != nil {
		return nil, fail(fn, err)
	}
	return st, nil
}

// fail is the builtins' one error helper. It prefixes err with the
// builtin's name fn, once (an error already starting with "fn: " keeps
// its text), and wraps it, so errors.Is and errors.As see the cause
// (sessions.ErrNotFound, *llm.Error, ...). A Starlark callback's error
// (*starlark.EvalError from a tool, a subscriber or a callback) is
// returned unchanged, so its traceback survives.
func fail(fn string, err error) error {
	if _, ok := err.(*starlark.EvalError); ok {
		return err
	}
	if strings.HasPrefix(err.Error(), fn+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", fn, err)
}

// NewState returns a VM with every builtin predeclared and, unless
// opts.LLM is set, the real providers of providers.Default reading the process
// environment. opts.Builtins, if set, adds to them.
func NewState(opts vm.Options) (*vm.State, error) {
	predeclared, err := Predeclared()
	if err != nil {
		return nil, err
	}
	for k, v := range opts.Builtins {
		predeclared[k] = v
	}
	opts.Builtins = predeclared
	if opts.LLM == nil {
		opts.LLM = providers.Default(os.Getenv)
	}
	return vm.New(opts)
}

// TestClock is the fixed clock of test VMs: always 2026-01-02T03:04:05Z.
func TestClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// TestIDs is the id source of test VMs: UUIDv7-shaped ids seeded by seed
// and stamped with TestClock, the same on every run. A test that makes
// its own store gives it the same source (sessions.WithIDs) as the VM
// (vm.Options.NewID), so session and message ids come from one sequence.
func TestIDs(seed uint64) func() string { return vm.SeededIDs(seed, TestClock) }

// NewTestState returns a VM for one Starlark test: every builtin plus the
// assert module and skip, an in-memory store (cap opts.Store's or the
// default), the fixed TestClock, ids seeded by seed, and the mock as the
// default provider with an empty environment. Fields of opts that are set
// win.
func NewTestState(opts vm.Options, seed uint64) (*vm.State, error) {
	if opts.Clock == nil {
		opts.Clock = TestClock
	}
	if opts.NewID == nil {
		opts.NewID = vm.SeededIDs(seed, opts.Clock)
	}
	if opts.LLM == nil {
		// hermetic: the mock by default, no environment
		opts.LLM = providers.Default(func(string) string { return "" })
		opts.LLM.Provider = llm.ProviderMock
	}
	testBuiltins, err := vm.TestBuiltins()
	if err != nil {
		return nil, err
	}
	for k, v := range opts.Builtins {
		testBuiltins[k] = v
	}
	opts.Builtins = testBuiltins
	return NewState(opts)
}
