package vm

import "go.starlark.net/starlark"

// WithCallDefaults makes d the thread's call defaults until restore is
// called: options (agent_loop's keys, and "system") that llm_call,
// agent_loop and agent_spawn called on the thread take when the call does
// not give them, as --provider and --model are for a whole run. `skein
// eval` sets a variant's options this way on each case's thread. The map
// is only read; the caller checks its keys and values before.
func WithCallDefaults(thread *starlark.Thread, d map[string]starlark.Value) (restore func()) {
	sc := mustScope(thread)
	prev := sc.defaults
	sc.defaults = d
	return func() { sc.defaults = prev }
}

// CallDefaults returns the thread's call defaults (nil: none).
func CallDefaults(thread *starlark.Thread) map[string]starlark.Value {
	if sc := scopeOf(thread); sc != nil {
		return sc.defaults
	}
	return nil
}
