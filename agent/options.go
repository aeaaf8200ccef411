package agent

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/didyoumean"
)

// Kind is the type of an option's value, which decides how a value is
// checked and read.
type Kind int

// Option kinds. The data kinds (every kind but KindCallable and KindHost)
// can be written in a file (agent files, workflow nodes) and are checked
// here; KindCallable and KindHost values come only from a script and are
// checked by the host that unpacks them.
const (
	KindInt          Kind = iota // an int >= Min
	KindFloat                    // an int or a float, finite (> 0 when Positive)
	KindSeconds                  // an int or a float > 0, read as a duration
	KindBool                     // a bool
	KindString                   // a string
	KindChoice                   // one of Choices
	KindStrings                  // a string or a list of strings
	KindDict                     // a dict (map)
	KindDicts                    // a list of dicts
	KindStringOrDict             // a string or a dict
	KindStringList               // a list of strings (tool names in a file)
	KindAny                      // any data, checked where it is used; Type says what it accepts
	KindCallable                 // a function of the script (Params are its arguments)
	KindHost                     // a value of the host (a workspace policy); Type says which
)

// MaxSeconds bounds every duration given in seconds: beyond it a
// time.Duration would overflow.
const MaxSeconds = 1e9

// maxInt bounds int options: larger values are refused as too large.
const maxInt = 1 << 40

// Option is one row of an option table: everything the parsers, the
// defaults and the generated reference know about one option. Adding an
// option is adding a row to a table plus reading it where it is used.
type Option struct {
	Name string
	Kind Kind
	// Default is the value a missing (or None) option reads as: an int,
	// float64, bool, string, time.Duration or nil. Defaults that are not
	// constants (the session's cap, the run's model) are nil and
	// described by DefaultDoc.
	Default any
	// DefaultDoc replaces Default in the reference when set.
	DefaultDoc string
	// Min is the least value of a KindInt option.
	Min int
	// Positive requires a KindFloat value > 0.
	Positive bool
	// Choices are the values of a KindChoice option.
	Choices []string
	// Params names the arguments a KindCallable option is called with.
	Params []string
	// Type is the accepted type as errors and the reference show it; it
	// defaults to the kind's.
	Type string
	// Doc is one line for the reference.
	Doc string
	// Call marks the options llm_call has too.
	Call bool
	// Script marks an option only a script can give: agent files,
	// workflow nodes and the HTTP API take the others.
	Script bool
}

// Data reports whether the option's value is plain data (see Kind).
func (o *Option) Data() bool { return o.Kind != KindCallable && o.Kind != KindHost }

// TypeName is the accepted type as errors and the reference word it.
func (o *Option) TypeName() string {
	if o.Type != "" {
		return o.Type
	}
	switch o.Kind {
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindSeconds:
		return "int or float"
	case KindBool:
		return "bool"
	case KindString, KindChoice:
		return "string"
	case KindStrings:
		return "string or list of strings"
	case KindDict:
		return "dict"
	case KindDicts:
		return "list of dicts"
	case KindStringOrDict:
		return "string or dict"
	case KindStringList:
		return "list of strings"
	case KindCallable:
		return "callable"
	}
	return "any"
}

// DefaultText is the default as the reference shows it.
func (o *Option) DefaultText() string {
	switch {
	case o.DefaultDoc != "":
		return o.DefaultDoc
	case o.Default == nil:
		return "None"
	}
	switch d := o.Default.(type) {
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
	return fmt.Sprint(o.Default)
}

// Constraint is the bound or choice list as the reference shows it.
func (o *Option) Constraint() string {
	switch o.Kind {
	case KindInt:
		return fmt.Sprintf(">= %d", o.Min)
	case KindSeconds:
		return "> 0"
	case KindFloat:
		if o.Positive {
			return "> 0"
		}
	case KindChoice:
		return "one of " + strings.Join(o.Choices, ", ")
	}
	return ""
}

// TypeOf names the type of a value as errors show it: the Starlark
// names of decoded data (int, float, string, bool, list, dict, NoneType),
// or the value's own Type() (a Starlark value).
func TypeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "NoneType"
	case int, int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any, []string:
		return "list"
	case map[string]any:
		return "dict"
	case interface{ Type() string }:
		return v.Type()
	}
	return fmt.Sprintf("%T", v)
}

// Check validates v, a decoded data value (int64 or int, float64, bool,
// string, []any, map[string]any), against the row. nil always passes: it
// reads as the default. The error has no prefix; the caller adds where
// the option was given ("agent_loop: ...", "node 'fix': ...").
func (o *Option) Check(v any) error {
	if v == nil {
		return nil
	}
	bad := func() error {
		return fmt.Errorf("option '%s': got %s, want %s", o.Name, TypeOf(v), o.TypeName())
	}
	switch o.Kind {
	case KindInt:
		n, ok := asInt(v)
		if !ok {
			return bad()
		}
		if n > maxInt {
			return fmt.Errorf("'%s' is too large", o.Name)
		}
		if n < int64(o.Min) {
			return fmt.Errorf("'%s' must be >= %d", o.Name, o.Min)
		}
	case KindFloat:
		f, ok := asFloat(v)
		if !ok {
			return bad()
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("'%s' must be a finite number, got %s", o.Name, formatFloat(f))
		}
		if o.Positive && !(f > 0) {
			return fmt.Errorf("'%s' must be > 0", o.Name)
		}
	case KindSeconds:
		f, ok := asFloat(v)
		if !ok {
			return bad()
		}
		return CheckSeconds(o.Name, f, false)
	case KindBool:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case KindString:
		if _, ok := v.(string); !ok {
			return bad()
		}
	case KindChoice:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		if !slices.Contains(o.Choices, s) {
			return fmt.Errorf("unknown %s '%s' (expected one of: %s)", o.Name, s, strings.Join(o.Choices, ", "))
		}
	case KindStrings, KindStringList:
		if _, ok := v.(string); ok && o.Kind == KindStrings {
			return nil
		}
		if _, ok := Strings(v); !ok {
			return bad()
		}
	case KindDict:
		if _, ok := v.(map[string]any); !ok {
			return bad()
		}
	case KindDicts:
		list, ok := v.([]any)
		if !ok {
			return bad()
		}
		for _, x := range list {
			if _, ok := x.(map[string]any); !ok {
				return bad()
			}
		}
	case KindStringOrDict:
		switch v.(type) {
		case string, map[string]any:
		default:
			return bad()
		}
	}
	return nil
}

// CheckSeconds checks a duration in seconds: finite, > 0 (>= 0 when zero
// is allowed), at most MaxSeconds.
func CheckSeconds(name string, f float64, zero bool) error {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return fmt.Errorf("'%s' must be a finite number, got %s", name, formatFloat(f))
	case zero && f < 0:
		return fmt.Errorf("'%s' must be >= 0", name)
	case !zero && f <= 0:
		return fmt.Errorf("'%s' must be > 0", name)
	case f > MaxSeconds:
		return fmt.Errorf("'%s' is too large", name)
	}
	return nil
}

// formatFloat writes a float as Starlark does (nan, +inf, -inf).
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "+inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return fmt.Sprint(f)
}

// Strings converts a list of strings ([]any of strings or []string).
func Strings(v any) ([]string, bool) {
	switch v := v.(type) {
	case []string:
		return v, true
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case int:
		return float64(v), true
	}
	return 0, false
}

// Table is the options of one builtin family, in reference order.
type Table struct {
	// Title names the table in the reference ("agent_loop").
	Title string
	// Intro is a sentence before the table in the reference.
	Intro string
	// Base is the table this one extends or narrows; the reference lists
	// only the rows that are not Base's.
	Base  *Table
	rows  []Option
	index map[string]int
}

// NewTable builds a table of base's rows (base may be nil) and rows. A
// name given twice is a programming error.
func NewTable(title, intro string, base *Table, rows []Option) *Table {
	t := &Table{Title: title, Intro: intro, Base: base, index: map[string]int{}}
	lists := [][]Option{rows}
	if base != nil {
		lists = [][]Option{base.rows, rows}
	}
	for _, list := range lists {
		for _, r := range list {
			if _, dup := t.index[r.Name]; dup {
				panic("agent: option " + r.Name + " is in table " + title + " twice")
			}
			t.index[r.Name] = len(t.rows)
			t.rows = append(t.rows, r)
		}
	}
	return t
}

// Select returns a table of t's rows for which keep is true, narrowing t
// (its Base is t: the reference shows only its intro).
func (t *Table) Select(title, intro string, keep func(*Option) bool) *Table {
	var rows []Option
	for i := range t.rows {
		if keep(&t.rows[i]) {
			rows = append(rows, t.rows[i])
		}
	}
	out := NewTable(title, intro, nil, rows)
	out.Base = t
	return out
}

// Without returns a table of t's rows but the named ones.
func (t *Table) Without(title, intro string, names ...string) *Table {
	return t.Select(title, intro, func(o *Option) bool { return !slices.Contains(names, o.Name) })
}

// With returns a table of t's rows and extra (a row of the same name
// replaces t's).
func (t *Table) With(extra ...Option) *Table {
	var rows []Option
	for _, r := range t.rows {
		if !slices.ContainsFunc(extra, func(e Option) bool { return e.Name == r.Name }) {
			rows = append(rows, r)
		}
	}
	return NewTable(t.Title, t.Intro, nil, append(rows, extra...))
}

// Rows returns the rows in reference order (not to be modified).
func (t *Table) Rows() []Option { return t.rows }

// Names returns the option names, sorted.
func (t *Table) Names() []string {
	out := make([]string, len(t.rows))
	for i, r := range t.rows {
		out[i] = r.Name
	}
	sort.Strings(out)
	return out
}

// Lookup returns the row of name, or nil.
func (t *Table) Lookup(name string) *Option {
	i, ok := t.index[name]
	if !ok {
		return nil
	}
	return &t.rows[i]
}

// Row returns the row of name; reading an option that is not in the
// table is a programming error.
func (t *Table) Row(name string) *Option {
	r := t.Lookup(name)
	if r == nil {
		panic("agent: option " + name + " is not in table " + t.Title)
	}
	return r
}

// UnknownKey is the error for a key that is not one of allowed (sorted):
// "unknown option key 'x' (did you mean 'y'? expected one of: ...)". what
// names the kind of key ("option key", "key").
func UnknownKey(what, key string, allowed []string) error {
	hint := ""
	if near := didyoumean.Closest(key, allowed); near != "" {
		hint = fmt.Sprintf("did you mean '%s'? ", near)
	}
	return fmt.Errorf("unknown %s '%s' (%sexpected one of: %s)", what, key, hint, strings.Join(allowed, ", "))
}
