package vm

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
)

// CheckArity reports an error unless fn can be called with one positional
// argument per name in params (the names say what they are, for the
// error) and no keyword arguments, so that a callback of the wrong shape
// fails where it is registered rather than when it is first called,
// perhaps deep in an agent loop. A builtin (a Go function) is not checked.
func CheckArity(fn starlark.Callable, params ...string) error {
	f, ok := fn.(*starlark.Function)
	if !ok {
		return nil
	}
	positional := f.NumParams() - f.NumKwonlyParams()
	if f.HasVarargs() {
		positional--
	}
	if f.HasKwargs() {
		positional--
	}
	required := 0
	for i := range positional {
		if f.ParamDefault(i) == nil {
			required++
		}
	}
	called := fmt.Sprintf("it is called with %d (%s)", len(params), strings.Join(params, ", "))
	if len(params) == 0 {
		called = "it is called with none"
	}
	switch {
	case required > len(params):
		return fmt.Errorf("%s needs %s, but %s", f.Name(), plural(required, "positional argument"), called)
	case positional < len(params) && !f.HasVarargs():
		return fmt.Errorf("%s takes %s, but %s", f.Name(), plural(positional, "positional argument"), called)
	}
	for i := positional; i < positional+f.NumKwonlyParams(); i++ {
		if f.ParamDefault(i) == nil {
			name, _ := f.Param(i)
			return fmt.Errorf("%s has a keyword-only parameter '%s' without a default, which is never given", f.Name(), name)
		}
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
