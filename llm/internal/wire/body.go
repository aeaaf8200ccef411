package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
)

// JSON is a request body held as the pieces it was assembled from: a
// head, the items of an array, separated by commas, and a tail. A body
// built from cached message forms (llm.WireForms) shares their bytes and
// even the slices that list them, so building a request allocates only
// for the new messages, however long the conversation, and its bytes are
// copied once, as it is sent (into the connection's buffer, or by the
// kernel from the pieces themselves: see Reader).
type JSON struct {
	head  []byte
	items [][][]byte // the array's items, in lists; empty ones are none
	tail  []byte
	size  int
}

// Len returns the body's length in bytes.
func (j *JSON) Len() int { return j.size }

// Bytes returns the body in one new slice.
func (j *JSON) Bytes() []byte {
	b := make([]byte, 0, j.size)
	for r := j.Reader(); ; {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil || len(b) == cap(b) {
			return b
		}
	}
}

// Reader returns a new reader of the body, which is also the request
// body an HTTP request sends it with (its Close does nothing). Besides
// reading, it can write what is left of the body itself (WriteTo, with
// Len): to a network connection, that is one system call (writev) from
// the pieces as they are, with no copy into a buffer.
func (j *JSON) Reader() *Reader { return &Reader{j: j, left: j.size} }

// Reader reads a JSON body: its head, then item k of list l of its items
// (preceded by a comma unless it is the first), then its tail.
type Reader struct {
	j          *JSON
	cur        []byte // what is left of the piece being read
	l, k       int    // the next item to read
	comma      bool   // the next item needs a comma first
	head, tail bool   // read already
	left       int    // bytes not read yet
}

func (r *Reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) == 0 && !r.next() {
			break
		}
		k := copy(p[n:], r.cur)
		n, r.cur = n+k, r.cur[k:]
	}
	r.left -= n
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Len returns how many bytes of the body are left to read.
func (r *Reader) Len() int { return r.left }

// WriteTo writes what is left of the body to w, from its pieces: with
// net.Buffers, so in one writev system call when w is a network
// connection, else in one Write per piece.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var bufs net.Buffers
	for len(r.cur) > 0 || r.next() {
		bufs, r.cur = append(bufs, r.cur), nil
	}
	n, err := bufs.WriteTo(w)
	r.left -= int(n)
	return n, err
}

// Close does nothing: the body is in memory.
func (r *Reader) Close() error { return nil }

// next sets cur to the next piece; it returns false at the end.
func (r *Reader) next() bool {
	j := r.j
	if !r.head {
		r.head, r.cur = true, j.head
		return true
	}
	for r.l < len(j.items) {
		if r.k == len(j.items[r.l]) {
			r.l, r.k = r.l+1, 0
			continue
		}
		if len(j.items[r.l][r.k]) == 0 {
			r.k++
			continue
		}
		if r.comma {
			r.comma, r.cur = false, comma
			return true
		}
		r.cur, r.comma = j.items[r.l][r.k], true
		r.k++
		return true
	}
	if !r.tail {
		r.tail, r.cur = true, j.tail
		return true
	}
	return false
}

var comma = []byte{','}

// Body returns a JSON request body: the members of fields (a struct or
// map that encoding/json encodes as an object, without key) and key, an
// array whose elements are the items of lists, in order, already encoded
// (several lists spare the caller joining them; an empty item stands for
// none, as a message with nothing to send). The items are shared, not
// encoded again or copied (see JSON): the caller must not modify them,
// or the lists, while the body is in use.
func Body(fields any, key string, lists ...[][]byte) (*JSON, error) {
	head, err := Marshal(fields)
	if err != nil {
		return nil, err
	}
	j := &JSON{head: append(appendString([]byte{'{'}, key), ":["...), items: lists}
	if rest := bytes.TrimSpace(head[1:]); len(rest) > 1 { // head is {...}
		j.tail = append([]byte("],"), rest...)
	} else {
		j.tail = []byte("]}")
	}
	items := 0
	j.size = len(j.head) + len(j.tail)
	for _, list := range lists {
		for _, it := range list {
			if len(it) > 0 {
				j.size += len(it)
				items++
			}
		}
	}
	if items > 1 {
		j.size += items - 1
	}
	return j, nil
}

// openArray returns {key:[items of lists]} without its closing brace,
// with room for extra more bytes.
func openArray(extra int, key string, lists ...[][]byte) []byte {
	n := extra + len(key) + 8
	for _, items := range lists {
		for _, it := range items {
			n += len(it) + 1
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	b = appendString(b, key)
	b = append(b, ":["...)
	empty := true
	for _, items := range lists {
		if !empty && hasItem(items) {
			b = append(b, ',')
		}
		b = appendItems(b, items)
		empty = empty && !hasItem(items)
	}
	return append(b, ']')
}

// Marshal is json.Marshal without HTML escaping: what a client keeps of a
// reply (Responses output items, Gemini parts) goes back byte for byte,
// and text goes out as it was given.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Join returns the JSON of each of vs (Marshal), separated by commas:
// the elements of an array, without its brackets. No values give nil.
func Join[T any](vs []T) ([]byte, error) {
	var out []byte
	for i, v := range vs {
		data, err := Marshal(v)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, data...)
	}
	return out, nil
}

// Turns assembles the turns of a conversation from the cached forms of
// its messages straight into one buffer: the items of consecutive
// messages of one role join one turn, {"role":role,key:[items]}. Bytes
// returns the turns joined by commas, one item for Body, so that a request
// of any length allocates a constant number of times.
type Turns struct {
	key  string
	buf  []byte
	role string
	open bool
}

// NewTurns returns a builder of turns whose items are under key, with
// room for size bytes of items.
func NewTurns(key string, size int) *Turns {
	return &Turns{key: key, buf: make([]byte, 0, size+size/8+64)}
}

// Add appends item (the encoded content of one message; empty: none) to
// the current turn when it has role, else to a new turn.
func (t *Turns) Add(role string, item []byte) {
	if len(item) == 0 {
		return
	}
	if t.open && role == t.role {
		t.buf = append(t.buf, ',')
		t.buf = append(t.buf, item...)
		return
	}
	t.close()
	if len(t.buf) > 0 {
		t.buf = append(t.buf, ',')
	}
	t.buf = append(t.buf, `{"role":`...)
	t.buf = appendString(t.buf, role)
	t.buf = append(t.buf, ',')
	t.buf = appendString(t.buf, t.key)
	t.buf = append(t.buf, ":["...)
	t.buf = append(t.buf, item...)
	t.open, t.role = true, role
}

// Bytes closes the last turn and returns the turns, joined by commas.
func (t *Turns) Bytes() []byte {
	t.close()
	return t.buf
}

func (t *Turns) close() {
	if t.open {
		t.buf = append(t.buf, "]}"...)
		t.open = false
	}
}

// appendString appends s as a JSON string: as it is between quotes when
// it needs no escaping (roles and keys do not), else encoded.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Object returns {key:[items]}, the items (already encoded, empty ones
// left out) copied in order.
func Object(key string, items [][]byte) []byte {
	return append(openArray(1, key, items), '}')
}

// appendItems appends the non-empty items, separated by commas.
func appendItems(b []byte, items [][]byte) []byte {
	first := true
	for _, it := range items {
		if len(it) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, it...)
	}
	return b
}

func hasItem(items [][]byte) bool {
	for _, it := range items {
		if len(it) > 0 {
			return true
		}
	}
	return false
}
