package wire

import (
	"strings"
	"testing"

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
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: got %s, %v, want %s", tt.name, got, err, tt.want)
		}
	}
	if got := string(Object("parts", [][]byte{nil, []byte(`{"text":"a"}`), []byte(`{"text":"b"}`)})); got != `{"parts":[{"text":"a"},{"text":"b"}]}` {
		t.Errorf("Object: %s", got)
	}
	if got := string(appendString(nil, "a\"b<")); got != `"a\"b<"` {
		t.Errorf("appendString: %s", got)
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
