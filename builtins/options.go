package builtins

import (
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/starlark"
)

// options is an unpacked options dict: the union of a positional dict and
// keyword arguments, checked against the allowed keys.
type options struct {
	fn     string
	values map[string]starlark.Value
}

// unpackOptions merges the positional options dict (or None) with kwargs.
// A key given both ways, an unknown key, or a non-dict positional value is
// an error in the API's words.
func unpackOptions(fn string, positional starlark.Value, kwargs []starlark.Tuple, allowed []string) (*options, error) {
	o := &options{fn: fn, values: map[string]starlark.Value{}}
	allowedSet := make(map[string]bool, len(allowed))
	for _, k := range allowed {
		allowedSet[k] = true
	}
	check := func(k string) error {
		if !allowedSet[k] {
			sorted := append([]string(nil), allowed...)
			sort.Strings(sorted)
			return fmt.Errorf("%s: unknown option key '%s' (expected one of: %s)", fn, k, strings.Join(sorted, ", "))
		}
		return nil
	}
	switch d := positional.(type) {
	case nil, starlark.NoneType:
	case *starlark.Dict:
		for _, item := range d.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: option keys must be strings, got %s", fn, item[0].Type())
			}
			if err := check(string(k)); err != nil {
				return nil, err
			}
			o.values[string(k)] = item[1]
		}
	default:
		return nil, fmt.Errorf("%s: options must be a dict, got %s", fn, positional.Type())
	}
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		if err := check(k); err != nil {
			return nil, err
		}
		if _, dup := o.values[k]; dup {
			return nil, fmt.Errorf("%s: option '%s' given twice", fn, k)
		}
		o.values[k] = kv[1]
	}
	return o, nil
}

// splitKwargs separates the keyword arguments naming the builtin's own
// parameters from the rest, which are options (unpackOptions).
func splitKwargs(kwargs []starlark.Tuple, params ...string) (named, rest []starlark.Tuple) {
	for _, kv := range kwargs {
		if contains(params, string(kv[0].(starlark.String))) {
			named = append(named, kv)
		} else {
			rest = append(rest, kv)
		}
	}
	return named, rest
}

// has reports whether key was given (None counts as given).
func (o *options) has(key string) bool {
	_, ok := o.values[key]
	return ok
}

// get returns the raw value of key and whether it was given and not None.
func (o *options) get(key string) (starlark.Value, bool) {
	v, ok := o.values[key]
	if !ok || v == starlark.None {
		return nil, false
	}
	return v, true
}

func (o *options) typeErr(key string, v starlark.Value, want string) error {
	return fmt.Errorf("%s: option '%s': got %s, want %s", o.fn, key, v.Type(), want)
}

// int sets *dst from key if given; the value must be an int >= min
// (and small enough for an int).
func (o *options) int(key string, dst *int, min int) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	i, isInt := v.(starlark.Int)
	if !isInt {
		return o.typeErr(key, v, "int")
	}
	n, ok := i.Int64()
	if !ok || n > 1<<40 {
		return fmt.Errorf("%s: `%s` is too large", o.fn, key)
	}
	if n < int64(min) {
		return fmt.Errorf("%s: `%s` must be >= %d", o.fn, key, min)
	}
	*dst = int(n)
	return nil
}

// float sets *dst from key if given (an int or a float).
func (o *options) float(key string, dst **float64) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	f, isNum := starlark.AsFloat(v)
	if !isNum {
		return o.typeErr(key, v, "float")
	}
	*dst = &f
	return nil
}

// bool sets *dst from key if given.
func (o *options) bool(key string, dst *bool) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	b, isBool := v.(starlark.Bool)
	if !isBool {
		return o.typeErr(key, v, "bool")
	}
	*dst = bool(b)
	return nil
}

// string sets *dst from key if given.
func (o *options) string(key string, dst *string) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	s, isStr := v.(starlark.String)
	if !isStr {
		return o.typeErr(key, v, "string")
	}
	*dst = string(s)
	return nil
}

// oneOf sets *dst from key if given; the value must be one of choices.
func (o *options) oneOf(key string, dst *string, choices []string) error {
	if _, ok := o.get(key); !ok {
		return nil
	}
	var s string
	if err := o.string(key, &s); err != nil {
		return err
	}
	for _, c := range choices {
		if s == c {
			*dst = s
			return nil
		}
	}
	return fmt.Errorf("%s: unknown %s '%s' (expected one of: %s)", o.fn, key, s, strings.Join(choices, ", "))
}

// callable sets *dst from key if given.
func (o *options) callable(key string, dst *starlark.Callable) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	c, isCallable := v.(starlark.Callable)
	if !isCallable {
		return o.typeErr(key, v, "callable")
	}
	*dst = c
	return nil
}

// stringList sets *dst from key if given: a list or tuple of strings.
func (o *options) stringList(key string, dst *[]string) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	seq, isSeq := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !isSeq {
		return o.typeErr(key, v, "list of strings")
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, isStr := seq.Index(i).(starlark.String)
		if !isStr {
			return fmt.Errorf("%s: option '%s'[%d]: got %s, want string", o.fn, key, i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	*dst = out
	return nil
}
