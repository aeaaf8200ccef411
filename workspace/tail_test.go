package workspace

import (
	"fmt"
	"testing"
)

func TestTail(t *testing.T) {
	tl := &Tail{Max: 8}
	for i := range 5 {
		fmt.Fprintf(tl, "line%d\n", i)
	}
	if got := tl.String(); got != "3\nline4\n" {
		t.Errorf("tail = %q", got)
	}
	cut := &Tail{Max: 4}
	cut.Write([]byte("aé€x")) // "é" is 2 bytes, "€" 3: the last 4 bytes are "€x"
	if got := cut.String(); got != "€x" {
		t.Errorf("tail = %q", got)
	}
	cut2 := &Tail{Max: 3}
	cut2.Write([]byte("é€x")) // the last 3 bytes cut "€": dropped
	if got := cut2.String(); got != "x" {
		t.Errorf("tail = %q", got)
	}
}
