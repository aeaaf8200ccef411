package wire

import (
	"bytes"
	"encoding/json"
)

// Body returns a JSON request body: the members of fields (a struct or
// map that encoding/json encodes as an object, without key) and key, an
// array whose elements are the items of lists, in order, already encoded
// (several lists spare the caller joining them). The items are copied,
// not encoded again, so a request built from cached message forms
// (llm.WireForms) costs one copy of their bytes.
func Body(fields any, key string, lists ...[][]byte) ([]byte, error) {
	head, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	qkey, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	n := len(head) + len(qkey) + 4
	for _, items := range lists {
		for _, it := range items {
			n += len(it) + 1
		}
	}
	var b bytes.Buffer
	b.Grow(n)
	b.WriteByte('{')
	b.Write(qkey)
	b.WriteString(":[")
	first := true
	for _, items := range lists {
		for _, it := range items {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.Write(it)
		}
	}
	b.WriteByte(']')
	if rest := bytes.TrimSpace(head[1:]); len(rest) > 1 { // head is {...}
		b.WriteByte(',')
		b.Write(rest)
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}
