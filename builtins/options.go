package builtins

import (
	"fmt"
	"slices"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/vm"
)

// options is an unpacked options dict: the union of a positional dict and
// keyword arguments, each value checked against its row of an
// agent.Table. Data values are decoded (agent.Values, which reads
// defaults); raw keeps every given Starlark value, for the options the
// builtins read as Starlark (callables, tools, a workspace, a compaction
// dict holding functions).
type options struct {
	fn   string
	vals agent.Values
	raw  map[string]starlark.Value
}

// unpackOptions merges the positional options dict (or None) with kwargs
// and checks every given value against its row of t. A key given both
// ways, an unknown key (with a "did you mean" hint), a value of the wrong
// type or out of bounds, or a non-dict positional value is an error
// naming fn.
func unpackOptions(t *agent.Table, fn string, positional starlark.Value, kwargs []starlark.Tuple) (*options, error) {
	o := &options{fn: fn, vals: t.Empty(), raw: map[string]starlark.Value{}}
	switch d := positional.(type) {
	case nil, starlark.NoneType:
	case *starlark.Dict:
		for _, item := range d.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: option keys must be strings, got %s", fn, item[0].Type())
			}
			if err := o.set(string(k), item[1], false); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("%s: options must be a dict, got %s", fn, positional.Type())
	}
	for _, kv := range kwargs {
		if err := o.set(string(kv[0].(starlark.String)), kv[1], true); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// set checks and sets one given option.
func (o *options) set(k string, v starlark.Value, fromKwargs bool) error {
	r := o.vals.Table().Lookup(k)
	if r == nil {
		return fmt.Errorf("%s: %w", o.fn, agent.UnknownKey("option key", k, o.vals.Table().Names()))
	}
	if _, dup := o.raw[k]; dup && fromKwargs {
		return fmt.Errorf("%s: option '%s' given twice", o.fn, k)
	}
	o.raw[k] = v
	x, err := o.decode(r, v)
	if err != nil {
		return err
	}
	if err := o.vals.Set(k, x); err != nil {
		return fmt.Errorf("%s: %w", o.fn, err)
	}
	return nil
}

// decode converts a Starlark value to the data agent.Option.Check reads:
// scalars and containers as vm.FromStarlark gives them, anything else as
// it is (so a type error names its Starlark type). A callable is checked
// here, against its row's Params.
func (o *options) decode(r *agent.Option, v starlark.Value) (any, error) {
	if v == starlark.None {
		return nil, nil
	}
	switch r.Kind {
	case agent.KindCallable:
		c, ok := v.(starlark.Callable)
		if !ok {
			return nil, o.typeErr(r.Name, v)
		}
		if err := vm.CheckArity(c, r.Params...); err != nil {
			return nil, fmt.Errorf("%s: option '%s': %w", o.fn, r.Name, err)
		}
		return c, nil
	case agent.KindHost, agent.KindAny:
		return v, nil
	}
	switch v := v.(type) {
	case starlark.Int:
		n, ok := v.Int64()
		if !ok {
			return nil, fmt.Errorf("%s: '%s' is too large", o.fn, r.Name)
		}
		return n, nil
	case starlark.Float:
		return float64(v), nil
	}
	switch v.(type) {
	case starlark.Bool, starlark.String, *starlark.List, starlark.Tuple, *starlark.Dict:
		x, err := vm.FromStarlark(v, r.Name)
		if err != nil {
			if r.Kind == agent.KindStringOrDict || r.Kind == agent.KindDict {
				// a dict holding functions (a compaction dict's
				// callbacks): its reader checks it
				return map[string]any{}, nil
			}
			return nil, fmt.Errorf("%s: option %w", o.fn, err)
		}
		return x, nil
	}
	return v, nil
}

func (o *options) typeErr(key string, v starlark.Value) error {
	return fmt.Errorf("%s: option '%s': got %s, want %s", o.fn, key, v.Type(), o.vals.Table().Row(key).TypeName())
}

// has reports whether key was given (None counts as given).
func (o *options) has(key string) bool { return o.vals.Has(key) }

// get returns the raw Starlark value of key and whether it was given and
// not None.
func (o *options) get(key string) (starlark.Value, bool) {
	o.vals.Table().Row(key)
	v, ok := o.raw[key]
	if !ok || v == starlark.None {
		return nil, false
	}
	return v, true
}

// int returns the checked value of a KindInt option, or its default.
func (o *options) int(key string) int { return o.vals.Int(key) }

// float returns the value of a KindFloat option, or nil when not given.
func (o *options) float(key string) *float64 { return o.vals.Float(key) }

// seconds returns the value of a KindSeconds option as a duration, or
// its default.
func (o *options) seconds(key string) time.Duration { return o.vals.Seconds(key) }

// bool returns the value of a KindBool option, or its default.
func (o *options) bool(key string) bool { return o.vals.Bool(key) }

// string returns the value of a KindString or KindChoice option, or its
// default.
func (o *options) string(key string) string { return o.vals.String(key) }

// callable returns the value of a KindCallable option, or nil.
func (o *options) callable(key string) starlark.Callable {
	if v, ok := o.get(key); ok {
		return v.(starlark.Callable)
	}
	return nil
}

// splitKwargs separates the keyword arguments naming the builtin's own
// parameters from the rest, which are options (optionTable.unpack).
func splitKwargs(kwargs []starlark.Tuple, params ...string) (named, rest []starlark.Tuple) {
	for _, kv := range kwargs {
		if slices.Contains(params, string(kv[0].(starlark.String))) {
			named = append(named, kv)
		} else {
			rest = append(rest, kv)
		}
	}
	return named, rest
}
