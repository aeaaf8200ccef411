package builtins

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// lazyList is a list whose elements are built from Go values only when
// read (type "lazy_list"): agent_loop's result["messages"], so that
// returning the result costs the same however long the loop ran. len and indexing build nothing but
// the element read (the same value on every read); anything else
// (iteration, slicing, in, +, *, the list methods, printing, json.encode,
// storing it) builds the whole list once, and from then on the value is
// that list. It reads as a list does; list(v) is a plain list, which is
// what == with a plain list needs.
type lazyList struct {
	n      int
	build  func(i int) starlark.Value // element i, before the list is built
	elems  []starlark.Value           // built elements, nil until read
	list   *starlark.List             // the whole list, once built
	frozen bool
}

var (
	_ starlark.Sliceable   = (*lazyList)(nil)
	_ starlark.HasSetIndex = (*lazyList)(nil)
	_ starlark.Container   = (*lazyList)(nil)
	_ starlark.HasAttrs    = (*lazyList)(nil)
	_ starlark.HasBinary   = (*lazyList)(nil)
	_ starlark.Comparable  = (*lazyList)(nil)
	_ vm.Materializer      = (*lazyList)(nil)
)

// newMessageList is a lazy list of message dicts.
func newMessageList(msgs []message.Message) *lazyList {
	return &lazyList{n: len(msgs), build: func(i int) starlark.Value { return messageToStarlark(&msgs[i]) }}
}

// Materialize builds the whole list (once) and returns it.
func (l *lazyList) Materialize() starlark.Value {
	if l.list == nil {
		for i := range l.n {
			l.element(i)
		}
		if l.elems == nil {
			l.elems = []starlark.Value{}
		}
		l.list, l.elems, l.build = starlark.NewList(l.elems), nil, nil
		if l.frozen {
			l.list.Freeze()
		}
	}
	return l.list
}

// element builds (once) and returns element i, before the whole list is
// built.
func (l *lazyList) element(i int) starlark.Value {
	if l.elems == nil {
		l.elems = make([]starlark.Value, l.n)
	}
	if l.elems[i] == nil {
		e := l.build(i)
		if l.frozen {
			e.Freeze()
		}
		l.elems[i] = e
	}
	return l.elems[i]
}

func (l *lazyList) String() string { return l.Materialize().String() }

// Type is "lazy_list".
func (l *lazyList) Type() string { return "lazy_list" }

// Freeze freezes the list and every element, built now or later.
func (l *lazyList) Freeze() {
	l.frozen = true
	if l.list != nil {
		l.list.Freeze()
	}
	for _, e := range l.elems {
		if e != nil {
			e.Freeze()
		}
	}
}

func (l *lazyList) Truth() starlark.Bool { return l.Len() > 0 }

func (l *lazyList) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: %s", l.Type())
}

func (l *lazyList) Len() int {
	if l.list != nil {
		return l.list.Len()
	}
	return l.n
}

func (l *lazyList) Index(i int) starlark.Value {
	if l.list != nil {
		return l.list.Index(i)
	}
	return l.element(i)
}

func (l *lazyList) Slice(start, end, step int) starlark.Value {
	return l.Materialize().(*starlark.List).Slice(start, end, step)
}

func (l *lazyList) Iterate() starlark.Iterator { return l.Materialize().(*starlark.List).Iterate() }

func (l *lazyList) SetIndex(i int, v starlark.Value) error {
	return l.Materialize().(*starlark.List).SetIndex(i, v)
}

func (l *lazyList) Has(y starlark.Value) (bool, error) {
	return l.Materialize().(*starlark.List).Has(y)
}

// Attr returns a list method bound to the built list.
func (l *lazyList) Attr(name string) (starlark.Value, error) {
	return l.Materialize().(*starlark.List).Attr(name)
}

func (l *lazyList) AttrNames() []string { return starlark.NewList(nil).AttrNames() }

// Binary applies op to the built list: + and * give plain lists.
func (l *lazyList) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	if side == starlark.Left {
		return starlark.Binary(op, l.Materialize(), y)
	}
	return starlark.Binary(op, y, l.Materialize())
}

// CompareSameType compares two lazy lists as lists compare.
func (l *lazyList) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return starlark.CompareDepth(op, l.Materialize(), y.(*lazyList).Materialize(), depth)
}
