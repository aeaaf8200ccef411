package wire

import (
	"encoding/json"
	"io"
	"testing"
	"testing/iotest"
)

// TestBody checks that a body assembled from pieces reads, whole and in
// reads of any size, as the JSON object of its fields and its array of
// items, and that it shares the items instead of copying them.
func TestBody(t *testing.T) {
	items := [][]byte{[]byte(`{"role":"user","content":"hi"}`), []byte(`{"role":"assistant","content":"hello"}`)}
	more := [][]byte{[]byte(`{"role":"user","content":"bye"}`)}
	for _, tc := range []struct {
		name   string
		fields any
		lists  [][][]byte
		want   string
	}{
		{"fields and two lists", map[string]any{"model": "m", "stream": true}, [][][]byte{items, more},
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"bye"}],"model":"m","stream":true}`},
		{"no fields", struct{}{}, [][][]byte{items}, `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`},
		{"no items", map[string]any{"model": "m"}, nil, `{"messages":[],"model":"m"}`},
		{"empty lists", map[string]any{"model": "m"}, [][][]byte{nil, more, nil, items[:1]},
			`{"messages":[{"role":"user","content":"bye"},{"role":"user","content":"hi"}],"model":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Body(tc.fields, "messages", tc.lists...)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(j.Bytes()); got != tc.want {
				t.Errorf("Bytes() = %s, want %s", got, tc.want)
			}
			if j.Len() != len(tc.want) {
				t.Errorf("Len() = %d, want %d", j.Len(), len(tc.want))
			}
			if !json.Valid(j.Bytes()) {
				t.Errorf("not JSON: %s", j.Bytes())
			}
			for _, r := range []io.Reader{j.Reader(), iotest.OneByteReader(j.Reader()), iotest.HalfReader(j.Reader())} {
				got, err := io.ReadAll(r)
				if err != nil || string(got) != tc.want {
					t.Errorf("read %q, %v; want %s", got, err, tc.want)
				}
			}
			if err := iotest.TestReader(j.Reader(), []byte(tc.want)); err != nil {
				t.Error(err)
			}
		})
	}
	j, err := Body(struct{}{}, "messages", items)
	if err != nil {
		t.Fatal(err)
	}
	if &j.items[0][0][0] != &items[0][0] {
		t.Error("the body copied an item instead of sharing it")
	}
	if got := Whole([]byte(`{}`)); string(got.Bytes()) != `{}` || got.Len() != 2 {
		t.Errorf("Whole: %s, %d", got.Bytes(), got.Len())
	}
}
