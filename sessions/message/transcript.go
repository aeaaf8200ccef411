package message

// View is read access to an ordered list of messages.
type View interface {
	Len() int
	// At returns the i'th message. The caller must not modify it.
	At(i int) *Message
}

// maxDepth bounds the chain of shared prefixes a transcript may have before
// a fork flattens it, so indexing stays cheap after many fork generations.
const maxDepth = 32

// Transcript is a persistent (immutable-message) sequence with structural
// sharing: Fork and Head cost O(1) and share the existing messages, and
// Append is amortised O(1).
//
// A Transcript value has a single owner that may Append to it (the session
// holding it); every value handed to anyone else comes from Fork, Head or
// Slice, which are clipped so that appending to them reallocates instead
// of writing into shared storage.
type Transcript struct {
	prefix *Transcript // frozen shared prefix, or nil
	own    []Message   // messages after the prefix
	depth  int         // length of the prefix chain
}

var _ View = Transcript{}

// NewTranscript returns a transcript holding msgs (which it takes over).
func NewTranscript(msgs []Message) Transcript {
	return Transcript{own: msgs[:len(msgs):len(msgs)]}
}

// Len returns the number of messages.
func (t Transcript) Len() int {
	if t.prefix == nil {
		return len(t.own)
	}
	return t.prefix.Len() + len(t.own)
}

// At returns the i'th message; it panics if i is out of range, like a slice.
func (t Transcript) At(i int) *Message {
	for cur := &t; ; {
		if cur.prefix == nil {
			return &cur.own[i]
		}
		n := cur.prefix.Len()
		if i >= n {
			return &cur.own[i-n]
		}
		cur = cur.prefix
	}
}

// Append returns t with msgs added at the end. Only the owner of t may
// call it (see the type's doc).
func (t Transcript) Append(msgs ...Message) Transcript {
	t.own = appendDoubling(t.own, msgs...)
	return t
}

// appendDoubling is append that doubles the storage when it grows: Go's
// append grows large slices by only a quarter, which copies a long
// transcript or event log about five times over.
func appendDoubling[T any](s []T, more ...T) []T {
	if need := len(s) + len(more); need > cap(s) {
		grown := make([]T, len(s), max(2*cap(s), need, 16))
		copy(grown, s)
		s = grown
	}
	return append(s, more...)
}

// frozen returns a clipped copy of t that nobody can append into.
func (t Transcript) frozen() *Transcript {
	return &Transcript{prefix: t.prefix, own: t.own[:len(t.own):len(t.own)], depth: t.depth}
}

// Fork returns a new transcript that shares all of t's messages. The new
// transcript and t can both be appended to independently afterwards.
func (t Transcript) Fork() Transcript {
	if t.depth >= maxDepth {
		return NewTranscript(t.Slice())
	}
	return Transcript{prefix: t.frozen(), depth: t.depth + 1}
}

// Head returns a new transcript sharing the first n messages of t
// (0 <= n <= t.Len()).
func (t Transcript) Head(n int) Transcript {
	if n < 0 || n > t.Len() {
		panic("message: Transcript.Head out of range")
	}
	cur := t
	for cur.prefix != nil && n <= cur.prefix.Len() {
		cur = *cur.prefix
	}
	base := cur.Len() - len(cur.own)
	cur.own = cur.own[: n-base : n-base]
	return cur.Fork()
}

// Slice returns the messages as one slice. For a transcript without a
// shared prefix it returns the backing storage itself (clipped, no copy);
// otherwise it copies. Callers must not modify the result.
func (t Transcript) Slice() []Message {
	if t.prefix == nil {
		return t.own[:len(t.own):len(t.own)]
	}
	out := make([]Message, 0, t.Len())
	var walk func(x *Transcript)
	walk = func(x *Transcript) {
		if x.prefix != nil {
			walk(x.prefix)
		}
		out = append(out, x.own...)
	}
	walk(&t)
	return out
}

// Flat returns t without shared prefixes: t itself when it has none, else a
// transcript over a fresh copy of its messages. Owners call it before
// repeated full reads so later reads are copy-free.
func (t Transcript) Flat() Transcript {
	if t.prefix == nil {
		return t
	}
	return NewTranscript(t.Slice())
}

// Tail returns the last n messages (n clamped to the length) as a new
// transcript. It copies only the kept messages' headers.
func (t Transcript) Tail(n int) Transcript {
	l := t.Len()
	if n > l {
		n = l
	}
	if n <= 0 {
		return Transcript{}
	}
	out := make([]Message, 0, n)
	for i := l - n; i < l; i++ {
		out = append(out, *t.At(i))
	}
	return NewTranscript(out)
}
