package wordcount

import "testing"

func TestCount(t *testing.T) {
	for in, want := range map[string]int{"": 0, "one": 1, "a b  c": 3, "tabs\tand\nnewlines": 3} {
		if got := Count(in); got != want {
			t.Errorf("Count(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestLines(t *testing.T) {
	for in, want := range map[string]int{"": 0, "x": 1, "x\n": 1, "x\ny": 2} {
		if got := Lines(in); got != want {
			t.Errorf("Lines(%q) = %d, want %d", in, got, want)
		}
	}
}
