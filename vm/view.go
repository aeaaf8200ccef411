package vm

import (
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Materializer is a Starlark value that stands for a plain one (a dict,
// a list) without holding it: FromStarlark, the json module's depth check
// and anything else that needs the plain value read it through
// Materialize.
type Materializer interface {
	starlark.Value
	// Materialize returns the plain value the view stands for.
	Materialize() starlark.Value
}

// StringMapView is a read-only Starlark mapping over a Go map of strings
// (type "dict_view"): making one costs nothing whatever the map's size,
// and a lookup reads the map itself. It reads like a dict with string
// values (indexing, `in`, len, iteration and items in sorted key order,
// get, keys, values, items, json.encode, dict(view)); assigning to it is
// an error. The map must not change while Starlark code can reach the
// view.
type StringMapView struct {
	m map[string]string
}

var (
	_ starlark.IterableMapping = (*StringMapView)(nil)
	_ starlark.Sequence        = (*StringMapView)(nil)
	_ starlark.HasAttrs        = (*StringMapView)(nil)
	_ starlark.Comparable      = (*StringMapView)(nil)
	_ Materializer             = (*StringMapView)(nil)
)

// NewStringMapView returns a view of m (nil reads as empty).
func NewStringMapView(m map[string]string) *StringMapView { return &StringMapView{m: m} }

// String prints the view as a dict of the same items would print.
func (v *StringMapView) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range v.sortedKeys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(syntax.Quote(k, false))
		b.WriteString(": ")
		b.WriteString(syntax.Quote(v.m[k], false))
	}
	b.WriteByte('}')
	return b.String()
}

// Type is "dict_view".
func (v *StringMapView) Type() string { return "dict_view" }

// Freeze does nothing: the view is read-only.
func (v *StringMapView) Freeze() {}

// Truth reports whether the map has an entry.
func (v *StringMapView) Truth() starlark.Bool { return len(v.m) > 0 }

// Hash fails: like a dict, the view is not hashable.
func (v *StringMapView) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: dict_view")
}

// Len is the number of entries.
func (v *StringMapView) Len() int { return len(v.m) }

// Get looks a key up.
func (v *StringMapView) Get(k starlark.Value) (starlark.Value, bool, error) {
	s, ok := k.(starlark.String)
	if !ok {
		return nil, false, nil
	}
	x, found := v.m[string(s)]
	if !found {
		return nil, false, nil
	}
	return starlark.String(x), true, nil
}

// Iterate iterates over the keys in sorted order.
func (v *StringMapView) Iterate() starlark.Iterator {
	keys := v.sortedKeys()
	elems := make([]starlark.Value, len(keys))
	for i, k := range keys {
		elems[i] = starlark.String(k)
	}
	return starlark.Tuple(elems).Iterate()
}

// Items returns the (key, value) pairs in sorted key order.
func (v *StringMapView) Items() []starlark.Tuple {
	keys := v.sortedKeys()
	out := make([]starlark.Tuple, len(keys))
	for i, k := range keys {
		out[i] = starlark.Tuple{starlark.String(k), starlark.String(v.m[k])}
	}
	return out
}

// Materialize returns a new dict of the view's items.
func (v *StringMapView) Materialize() starlark.Value {
	d := starlark.NewDict(len(v.m))
	for _, item := range v.Items() {
		_ = d.SetKey(item[0], item[1])
	}
	return d
}

// CompareSameType compares two views as dicts compare (== and != only).
func (v *StringMapView) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	w, ok := y.(*StringMapView)
	if !ok {
		return false, fmt.Errorf("%s %s %s not implemented", v.Type(), op, y.Type())
	}
	switch op {
	case syntax.EQL, syntax.NEQ:
		eq := len(v.m) == len(w.m)
		for k, x := range v.m {
			if !eq {
				break
			}
			y, ok := w.m[k]
			eq = ok && x == y
		}
		return eq == (op == syntax.EQL), nil
	}
	return false, fmt.Errorf("%s %s %s not implemented", v.Type(), op, y.Type())
}

var stringMapViewMethods = []string{"get", "items", "keys", "values"}

// AttrNames lists the dict methods a view has.
func (v *StringMapView) AttrNames() []string { return stringMapViewMethods }

// Attr returns one of the read-only dict methods.
func (v *StringMapView) Attr(name string) (starlark.Value, error) {
	if !slices.Contains(stringMapViewMethods, name) {
		return nil, nil
	}
	return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if name == "get" {
			var key, dflt starlark.Value = nil, starlark.None
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &key, &dflt); err != nil {
				return nil, err
			}
			if x, found, _ := v.Get(key); found {
				return x, nil
			}
			return dflt, nil
		}
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		items := v.Items()
		out := make([]starlark.Value, len(items))
		for i, item := range items {
			switch name {
			case "keys":
				out[i] = item[0]
			case "values":
				out[i] = item[1]
			default:
				out[i] = item
			}
		}
		return starlark.NewList(out), nil
	}).BindReceiver(v), nil
}

func (v *StringMapView) sortedKeys() []string {
	keys := make([]string, 0, len(v.m))
	for k := range v.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
