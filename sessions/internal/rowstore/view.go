package rowstore

import (
	"fmt"
	"slices"
)

// View describes a message list (see the package doc): messages
// [BaseFrom, BaseTo) of the frozen view Base (none when Base is 0), then
// the owner's own rows from position OwnFrom on. A session's current view
// lives in its session row; a frozen view is a row of its own.
type View struct {
	Base             int64
	BaseFrom, BaseTo int64
	OwnFrom          int64
}

// BaseLen is the number of messages v takes from its base.
func (v View) BaseLen() int64 { return v.BaseTo - v.BaseFrom }

// Next is the position of the owner's next own row when v is its current
// view and holds n messages: own rows are exactly [OwnFrom, Next).
func (v View) Next(n int64) int64 { return v.OwnFrom + n - v.BaseLen() }

// Drop returns v without its first d messages (0 <= d <= its length).
func (v View) Drop(d int64) View {
	if d < v.BaseLen() {
		v.BaseFrom += d
		return v
	}
	return View{OwnFrom: v.OwnFrom + d - v.BaseLen()}
}

// BaseArg is v.Base as a column value (nil, SQL NULL, for none).
func (v View) BaseArg() any {
	if v.Base == 0 {
		return nil
	}
	return v.Base
}

// Frozen is a stored frozen view: the session row that owns its own rows,
// and the view.
type Frozen struct {
	Owner int64
	View  View
}

// Span is a range [From, To) of one session's own message rows.
type Span struct {
	Owner, From, To int64
}

// Spans returns the row ranges that hold the first n messages of v, the
// current view of session row owner, in order. frozen reads a frozen view
// by its id; Spans calls it once per base it descends into.
func Spans(owner int64, v View, n int64, frozen func(vid int64) (Frozen, error)) ([]Span, error) {
	var out []Span // newest range first; reversed at the end
	from, to := int64(0), n
	for {
		bl := v.BaseLen()
		if to > bl {
			out = append(out, Span{owner, v.OwnFrom + max(from-bl, 0), v.OwnFrom + to - bl})
		}
		if from >= bl || v.Base == 0 {
			break
		}
		from, to = v.BaseFrom+from, v.BaseFrom+min(to, bl)
		vid := v.Base
		f, err := frozen(vid)
		if err != nil {
			return nil, fmt.Errorf("frozen view %d: %w", vid, err)
		}
		owner, v = f.Owner, f.View
	}
	slices.Reverse(out)
	return out, nil
}

// ForkView is the view of a fork that keeps the first keep messages of a
// source whose current view is src, and whether the fork needs src frozen
// first: then its Base is to be set to the new frozen view's id. A fork
// that keeps only messages of the source's own base shares that base
// directly and freezes nothing.
func ForkView(src View, keep int64) (v View, freeze bool) {
	switch {
	case keep == 0:
		return View{}, false
	case keep <= src.BaseLen():
		return View{Base: src.Base, BaseFrom: src.BaseFrom, BaseTo: src.BaseFrom + keep}, false
	}
	return View{BaseTo: keep}, true
}

// DropLast returns the current view of a session, which holds n messages
// in view v, without its last d (0 < d <= n). The dropped rows stay, as
// history: the new view's own part starts after every row the session
// has, so later appends never reuse their positions. When the kept
// messages reach into v's own rows, freeze stores v as a frozen view and
// the new view takes its first n-d messages from it: O(1) rows either
// way.
func DropLast(v View, n, d int64, freeze func(View) (int64, error)) (View, error) {
	keep, next := n-d, v.Next(n)
	switch {
	case keep == 0:
		return View{OwnFrom: next}, nil
	case keep <= v.BaseLen():
		return View{Base: v.Base, BaseFrom: v.BaseFrom, BaseTo: v.BaseFrom + keep, OwnFrom: next}, nil
	}
	vid, err := freeze(v)
	if err != nil {
		return View{}, err
	}
	return View{Base: vid, BaseTo: keep, OwnFrom: next}, nil
}
