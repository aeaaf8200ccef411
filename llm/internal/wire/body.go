package wire

import (
	"bytes"
	"encoding/json"
	"io"
)

// JSON is a request body held as the pieces it was assembled from: a
// head, the items of an array, separated by commas, and a tail. A body
// built from cached message forms (llm.WireForms) shares their bytes and
// even the slices that list them, so building a request allocates only
// for the new messages, however long the conversation, and its bytes are
// copied once, into the connection's buffer, as it is sent.
type JSON struct {
	head  []byte
	items [][][]byte // the array's items, in lists
	tail  []byte
	size  int
}

// Whole returns body as a JSON request body.
func Whole(body []byte) *JSON { return &JSON{head: body, size: len(body)} }

// Len returns the body's length in bytes.
func (j *JSON) Len() int { return j.size }

// Bytes returns the body in one slice (a copy unless it is one piece).
func (j *JSON) Bytes() []byte {
	if len(j.items) == 0 && len(j.tail) == 0 {
		return j.head
	}
	b, _ := io.ReadAll(j.Reader())
	return b
}

// Reader returns a new reader of the body.
func (j *JSON) Reader() io.Reader { return &jsonReader{j: j} }

// jsonReader reads a JSON body: its head, then item k of list l of its
// items (preceded by a comma unless it is the first), then its tail.
type jsonReader struct {
	j          *JSON
	cur        []byte // what is left of the piece being read
	l, k       int    // the next item to read
	comma      bool   // the next item needs a comma first
	head, tail bool   // read already
}

func (r *jsonReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) == 0 && !r.next() {
			break
		}
		k := copy(p[n:], r.cur)
		n, r.cur = n+k, r.cur[k:]
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// next sets cur to the next piece; it returns false at the end.
func (r *jsonReader) next() bool {
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
// (several lists spare the caller joining them). The items are shared,
// not encoded again or copied: the caller must not modify them, or the
// lists, while the body is in use.
func Body(fields any, key string, lists ...[][]byte) (*JSON, error) {
	head, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	qkey, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	j := &JSON{head: append(append([]byte{'{'}, qkey...), ":["...), items: lists}
	if rest := bytes.TrimSpace(head[1:]); len(rest) > 1 { // head is {...}
		j.tail = append([]byte("],"), rest...)
	} else {
		j.tail = []byte("]}")
	}
	items := 0
	j.size = len(j.head) + len(j.tail)
	for _, list := range lists {
		for _, it := range list {
			j.size += len(it)
			items++
		}
	}
	if items > 1 {
		j.size += items - 1
	}
	return j, nil
}
