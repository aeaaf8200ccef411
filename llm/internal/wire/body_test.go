package wire

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/skein-dev/skein/llm"
)

// TestBody checks the assembly of request bodies from encoded items:
// empty items stand for none, turns merge consecutive items of one role,
// and nothing is HTML-escaped.
func TestBody(t *testing.T) {
	turns := NewTurns("parts", 0)
	turns.Add("user", []byte(`1`))
	turns.Add("user", nil)
	turns.Add("user", []byte(`2`))
	turns.Add("model", []byte(`"<&>"`))
	turns.Add("user", []byte(`3`))
	tests := []struct {
		name   string
		fields any
		lists  [][][]byte
		want   string
	}{
		{"no items, no fields", struct{}{}, nil, `{"k":[]}`},
		{"empty items", map[string]any{"a": "<b>"}, [][][]byte{{nil, {}}, {nil}}, `{"k":[],"a":"<b>"}`},
		{"items across lists", map[string]int{"n": 1}, [][][]byte{{[]byte(`1`), nil}, {}, {nil, []byte(`2`), []byte(`3`)}}, `{"k":[1,2,3],"n":1}`},
		{"turns", struct{}{}, [][][]byte{{turns.Bytes()}}, `{"k":[{"role":"user","parts":[1,2]},{"role":"model","parts":["<&>"]},{"role":"user","parts":[3]}]}`},
	}
	for _, tt := range tests {
		got, err := Body(tt.fields, "k", tt.lists...)
		if err != nil || string(got.Bytes()) != tt.want || got.Len() != len(tt.want) {
			t.Fatalf("%s: got %s, %v, want %s", tt.name, got.Bytes(), err, tt.want)
		}
		// Read in pieces of any size, it is the same.
		for _, r := range []io.Reader{got.Reader(), iotest.OneByteReader(got.Reader()), iotest.HalfReader(got.Reader())} {
			if read, err := io.ReadAll(r); err != nil || string(read) != tt.want {
				t.Errorf("%s: read %s, %v, want %s", tt.name, read, err, tt.want)
			}
		}
		if err := iotest.TestReader(got.Reader(), []byte(tt.want)); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		// Or read a few bytes and let it write the rest itself.
		for _, k := range []int{0, 1, 7, len(tt.want)} {
			r := got.Reader()
			head := make([]byte, min(k, len(tt.want)))
			if _, err := io.ReadFull(r, head); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if r.Len() != len(tt.want)-len(head) {
				t.Errorf("%s: after %d bytes read, Len is %d, want %d", tt.name, len(head), r.Len(), len(tt.want)-len(head))
			}
			var rest strings.Builder
			if n, err := r.WriteTo(&rest); err != nil || int(n) != rest.Len() || string(head)+rest.String() != tt.want || r.Len() != 0 {
				t.Errorf("%s: read %q, then wrote %q (%d), %v, Len %d; want %s", tt.name, head, rest.String(), n, err, r.Len(), tt.want)
			}
		}
	}
	if got := string(Object("parts", [][]byte{nil, []byte(`{"text":"a"}`), []byte(`{"text":"b"}`)})); got != `{"parts":[{"text":"a"},{"text":"b"}]}` {
		t.Errorf("Object: %s", got)
	}
	if got := string(appendString(nil, "a\"b<")); got != `"a\"b<"` {
		t.Errorf("appendString: %s", got)
	}
}

// TestBodyShares checks that a body shares the items it is built from
// instead of copying them.
func TestBodyShares(t *testing.T) {
	items := [][]byte{[]byte(`{"role":"user","content":"hi"}`), []byte(`{"role":"assistant","content":"hello"}`)}
	j, err := Body(struct{}{}, "messages", items)
	if err != nil {
		t.Fatal(err)
	}
	if &j.items[0][0][0] != &items[0][0] {
		t.Error("the body copied an item instead of sharing it")
	}
}

// TestEventReaderTerminator: a stream that must end with an event and
// ends before it is a transient network error, not io.EOF.
func TestEventReaderTerminator(t *testing.T) {
	r := NewEventReader(strings.NewReader("data: a\n\n"), "[DONE]")
	if _, data, err := r.Next(); err != nil || string(data) != "a" {
		t.Fatalf("first event %q, %v", data, err)
	}
	_, _, err := r.Next()
	if e, ok := llm.AsError(err); !ok || e.Category != llm.Network || e.Message != "stream ended before [DONE]: the reply is incomplete" {
		t.Fatalf("got %v", err)
	}
}
