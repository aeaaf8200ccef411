package builtins

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
)

// kind is the type of an option's value, which decides how it is checked
// and read.
type kind int

const (
	kindInt      kind = iota // an int >= Min
	kindFloat                // an int or a float
	kindSeconds              // an int or a float > 0, read as a duration
	kindBool                 // a bool
	kindString               // a string
	kindChoice               // one of Choices
	kindCallable             // a function
	kindAny                  // checked where it is used; Type says what it accepts
)

// option is one row of an option table: everything the parser, the
// defaults and the reference know about one option. Adding an option to
// a builtin is adding a row here plus reading it where it is used.
type option struct {
	Name string
	Kind kind
	// Default is the value a missing (or None) option reads as: an int,
	// float64, bool, string, time.Duration or nil. Defaults that are not
	// constants (the session's cap, the VM's model) are nil and described
	// by DefaultDoc.
	Default any
	// DefaultDoc replaces Default in the reference when set.
	DefaultDoc string
	// Min is the least value of a kindInt option.
	Min int
	// Choices are the values of a kindChoice option.
	Choices []string
	// Params names the arguments a kindCallable option is called with;
	// a function that cannot take them is refused (vm.CheckArity).
	Params []string
	// Type is the accepted type as errors and the reference show it; it
	// defaults to the kind's.
	Type string
	// Doc is one line for the reference.
	Doc string
}

// typeName is the accepted type as errors and the reference word it.
func (r *option) typeName() string {
	if r.Type != "" {
		return r.Type
	}
	switch r.Kind {
	case kindInt:
		return "int"
	case kindFloat:
		return "float"
	case kindSeconds:
		return "int or float"
	case kindBool:
		return "bool"
	case kindString, kindChoice:
		return "string"
	case kindCallable:
		return "callable"
	}
	return "any"
}

// defaultText is the default as the reference shows it.
func (r *option) defaultText() string {
	switch {
	case r.DefaultDoc != "":
		return r.DefaultDoc
	case r.Default == nil:
		return "None"
	}
	switch d := r.Default.(type) {
	case string:
		return fmt.Sprintf("%q", d)
	case bool:
		if d {
			return "True"
		}
		return "False"
	case time.Duration:
		return fmt.Sprint(d.Seconds())
	}
	return fmt.Sprint(r.Default)
}

// constraint is the bound or choice list as the reference shows it.
func (r *option) constraint() string {
	switch r.Kind {
	case kindInt:
		return fmt.Sprintf(">= %d", r.Min)
	case kindSeconds:
		return "> 0"
	case kindChoice:
		return "one of " + strings.Join(r.Choices, ", ")
	}
	return ""
}

// optionTable is the options of one builtin family, in reference order.
type optionTable struct {
	// Title names the table in the reference ("agent_loop and llm_call").
	Title string
	// Intro is a sentence before the table in the reference.
	Intro string
	// base is the table this one extends (its rows come first); the
	// reference lists only the rows of this table's own.
	base  *optionTable
	rows  []option
	index map[string]int
}

// newOptionTable builds a table of base's rows (base may be nil) and
// rows: agent_loop's options extend llm_call's. A name given twice is a
// programming error.
func newOptionTable(title, intro string, base *optionTable, rows []option) *optionTable {
	t := &optionTable{Title: title, Intro: intro, base: base, index: map[string]int{}}
	lists := [][]option{rows}
	if base != nil {
		lists = [][]option{base.rows, rows}
	}
	for _, list := range lists {
		for _, r := range list {
			if _, dup := t.index[r.Name]; dup {
				panic("builtins: option " + r.Name + " is in table " + title + " twice")
			}
			t.index[r.Name] = len(t.rows)
			t.rows = append(t.rows, r)
		}
	}
	return t
}

// without returns a table of t's rows but the named ones. The reference
// shows only its intro: its rows are t's.
func (t *optionTable) without(title, intro string, names ...string) *optionTable {
	var rows []option
	for _, r := range t.rows {
		if !slices.Contains(names, r.Name) {
			rows = append(rows, r)
		}
	}
	out := newOptionTable(title, intro, nil, rows)
	out.base = t
	return out
}

// names returns the option names, sorted.
func (t *optionTable) names() []string {
	out := make([]string, len(t.rows))
	for i, r := range t.rows {
		out[i] = r.Name
	}
	sort.Strings(out)
	return out
}

// row returns the row of name; reading an option that is not in the
// table is a programming error.
func (t *optionTable) row(name string) *option {
	i, ok := t.index[name]
	if !ok {
		panic("builtins: option " + name + " is not in table " + t.Title)
	}
	return &t.rows[i]
}

// options is an unpacked options dict: the union of a positional dict and
// keyword arguments, each value checked against its row.
type options struct {
	fn     string
	table  *optionTable
	values map[string]starlark.Value
}

// unpack merges the positional options dict (or None) with kwargs and
// checks every given value against its row. A key given both ways, an
// unknown key (with a "did you mean" hint), a value of the wrong type or
// out of bounds, or a non-dict positional value is an error naming fn.
func (t *optionTable) unpack(fn string, positional starlark.Value, kwargs []starlark.Tuple) (*options, error) {
	o := &options{fn: fn, table: t, values: map[string]starlark.Value{}}
	add := func(k string, v starlark.Value, fromKwargs bool) error {
		if _, ok := t.index[k]; !ok {
			return unknownKey(fn, "option key", k, t.names())
		}
		if _, dup := o.values[k]; dup && fromKwargs {
			return fmt.Errorf("%s: option '%s' given twice", fn, k)
		}
		o.values[k] = v
		return o.check(t.row(k))
	}
	switch d := positional.(type) {
	case nil, starlark.NoneType:
	case *starlark.Dict:
		for _, item := range d.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: option keys must be strings, got %s", fn, item[0].Type())
			}
			if err := add(string(k), item[1], false); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("%s: options must be a dict, got %s", fn, positional.Type())
	}
	for _, kv := range kwargs {
		if err := add(string(kv[0].(starlark.String)), kv[1], true); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// unknownKey is the error for a key that is not one of allowed (sorted):
// "unknown option key 'x' (did you mean 'y'? expected one of: ...)".
func unknownKey(fn, what, key string, allowed []string) error {
	hint := ""
	if near := vm.Closest(key, allowed); near != "" {
		hint = fmt.Sprintf("did you mean '%s'? ", near)
	}
	return fmt.Errorf("%s: unknown %s '%s' (%sexpected one of: %s)", fn, what, key, hint, strings.Join(allowed, ", "))
}

// check validates the given value of r (None always passes: it reads as
// the default).
func (o *options) check(r *option) error {
	v := o.values[r.Name]
	if v == starlark.None {
		return nil
	}
	switch r.Kind {
	case kindInt:
		i, ok := v.(starlark.Int)
		if !ok {
			return o.typeErr(r.Name, v)
		}
		n, ok := i.Int64()
		if !ok || n > 1<<40 {
			return fmt.Errorf("%s: '%s' is too large", o.fn, r.Name)
		}
		if n < int64(r.Min) {
			return fmt.Errorf("%s: '%s' must be >= %d", o.fn, r.Name, r.Min)
		}
	case kindFloat:
		f, ok := starlark.AsFloat(v)
		if !ok {
			return o.typeErr(r.Name, v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: '%s' must be a finite number, got %s", o.fn, r.Name, starlark.Float(f))
		}
	case kindSeconds:
		f, ok := starlark.AsFloat(v)
		if _, isBool := v.(starlark.Bool); isBool || !ok {
			return o.typeErr(r.Name, v)
		}
		if err := checkSeconds(o.fn, r.Name, f, false); err != nil {
			return err
		}
	case kindBool:
		if _, ok := v.(starlark.Bool); !ok {
			return o.typeErr(r.Name, v)
		}
	case kindString:
		if _, ok := v.(starlark.String); !ok {
			return o.typeErr(r.Name, v)
		}
	case kindChoice:
		s, ok := v.(starlark.String)
		if !ok {
			return o.typeErr(r.Name, v)
		}
		if !slices.Contains(r.Choices, string(s)) {
			return fmt.Errorf("%s: unknown %s '%s' (expected one of: %s)", o.fn, r.Name, string(s), strings.Join(r.Choices, ", "))
		}
	case kindCallable:
		c, ok := v.(starlark.Callable)
		if !ok {
			return o.typeErr(r.Name, v)
		}
		if err := vm.CheckArity(c, r.Params...); err != nil {
			return fmt.Errorf("%s: option '%s': %w", o.fn, r.Name, err)
		}
	}
	return nil
}

func (o *options) typeErr(key string, v starlark.Value) error {
	return fmt.Errorf("%s: option '%s': got %s, want %s", o.fn, key, v.Type(), o.table.row(key).typeName())
}

// has reports whether key was given (None counts as given).
func (o *options) has(key string) bool {
	o.table.row(key)
	_, ok := o.values[key]
	return ok
}

// get returns the raw value of key and whether it was given and not None.
func (o *options) get(key string) (starlark.Value, bool) {
	o.table.row(key)
	v, ok := o.values[key]
	if !ok || v == starlark.None {
		return nil, false
	}
	return v, true
}

// int returns the checked value of a kindInt option, or its default.
func (o *options) int(key string) int {
	if v, ok := o.get(key); ok {
		n, _ := v.(starlark.Int).Int64()
		return int(n)
	}
	d, _ := o.table.row(key).Default.(int)
	return d
}

// float returns the value of a kindFloat option, or nil when not given.
func (o *options) float(key string) *float64 {
	if v, ok := o.get(key); ok {
		f, _ := starlark.AsFloat(v)
		return &f
	}
	if d, ok := o.table.row(key).Default.(float64); ok {
		return &d
	}
	return nil
}

// seconds returns the value of a kindSeconds option as a duration, or its
// default.
func (o *options) seconds(key string) time.Duration {
	if v, ok := o.get(key); ok {
		f, _ := starlark.AsFloat(v)
		return time.Duration(f * float64(time.Second))
	}
	d, _ := o.table.row(key).Default.(time.Duration)
	return d
}

// bool returns the value of a kindBool option, or its default.
func (o *options) bool(key string) bool {
	if v, ok := o.get(key); ok {
		return bool(v.(starlark.Bool))
	}
	d, _ := o.table.row(key).Default.(bool)
	return d
}

// string returns the value of a kindString or kindChoice option, or its
// default.
func (o *options) string(key string) string {
	if v, ok := o.get(key); ok {
		return string(v.(starlark.String))
	}
	d, _ := o.table.row(key).Default.(string)
	return d
}

// callable returns the value of a kindCallable option, or nil.
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
