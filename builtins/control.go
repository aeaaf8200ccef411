package builtins

// Control builtins.
//
//	catch(fn, *args, **kwargs) -> str or None

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
)

func controlSpecs() []Spec {
	const area = "Control"
	return []Spec{
		{"catch", "(fn, *args, **kwargs) -> str or None", "Call fn; return None if it succeeds, else its error message (cancellation and step limits are never caught).", area, catchBuiltin},
	}
}

// catchBuiltin calls fn and returns its error message, or None. Starlark
// has no exceptions; catch makes an expected failure explicit in a script
// instead of swallowing it. Cancellation (Ctrl-C, --timeout) and the step
// limit always propagate.
func catchBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, starlark.UnpackPositionalArgs(b.Name(), args, nil, 1)
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: for parameter fn: got %s, want callable", b.Name(), args[0].Type())
	}
	_, err := starlark.Call(thread, fn, args[1:], kwargs)
	if err == nil {
		return starlark.None, nil
	}
	st, stErr := stateOf(thread, b.Name())
	if stErr != nil {
		return nil, stErr
	}
	if st.Context().Err() != nil || strings.Contains(err.Error(), "Starlark computation cancelled") {
		return nil, err
	}
	return starlark.String(err.Error()), nil
}
