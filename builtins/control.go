package builtins

// Control builtins.
//
//	catch(fn, *args, **kwargs) -> str or None
//	sleep(seconds) -> None

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/vm"
)

func controlSpecs() []Spec {
	const area = "Control"
	return []Spec{
		{"catch", "(fn, *args, **kwargs) -> str or None", "Call fn; return None if it succeeds, else its error message (cancellation and step limits are never caught).", area, catchBuiltin},
		{"sleep", "(seconds) -> None", "Wait (int or float seconds); Ctrl-C, --timeout and an agent loop's timeout_s interrupt it.", area, sleepBuiltin},
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

func sleepBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var secs starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "seconds", &secs); err != nil {
		return nil, err
	}
	f, ok := starlark.AsFloat(secs)
	if _, isBool := secs.(starlark.Bool); isBool || !ok {
		return nil, fmt.Errorf("%s: for parameter seconds: got %s, want int or float", b.Name(), secs.Type())
	}
	if err := checkSeconds(b.Name(), "seconds", f, true); err != nil {
		return nil, err
	}
	if err := llm.SleepContext(vm.ContextOf(thread), time.Duration(f*float64(time.Second))); err != nil {
		return nil, fail(b.Name(), context.Cause(vm.ContextOf(thread)))
	}
	return starlark.None, nil
}
