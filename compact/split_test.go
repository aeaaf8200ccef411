package compact

import "testing"

func TestSplit(t *testing.T) {
	tests := []struct {
		name       string
		pattern    string
		keepFirst  int
		keepLast   int
		preferUser bool
		want       string // "" when nothing is archived
	}{
		{"under keep_last", "U A U A", 0, 12, true, ""},
		{"exactly keep_first+keep_last", "U A U A", 2, 2, true, ""},
		{"plain cut at a user message", "U A U A", 0, 2, true, "[U A] U A"},
		{"snap back to a user message", "U A U A A A", 0, 2, true, "[U A] U A A A"},
		{"no snap without preferUser", "U A U A A A", 0, 2, false, "[U A U A] A A"},
		{"the snap stays out of the prefix", "U A U A A A", 2, 2, true, "U A [U A] A A"},
		{"pair at the plain cut", "U A* T A*2 T T A", 0, 2, true, "[U A* T] A*2 T T A"},
		{"parallel pair at the plain cut", "U A U A*3 T T T", 0, 2, true, "[U A] U A*3 T T T"},
		{"tool-heavy, only the first user message", "U A*3 T T T", 0, 2, true, "[U] A*3 T T T"},
		{"tool-heavy, long", "U A* T A* T A* T A* T", 0, 3, true, "[U A* T A* T] A* T A* T"},
		{"prefix extended over a pair", "U A*2 T T A U A", 2, 2, true, "U A*2 T T [A] U A"},
		{"forward when the pair starts at the prefix", "U A*4 T T T T A", 1, 2, true, "U [A*4 T T T T] A"},
		{"forward to the end", "S U A*4 T T T T", 2, 2, true, "S U [A*4 T T T T]"},
		{"keep_last 0 archives everything after the prefix", "S U A U A", 1, 0, true, "S [U A U A]"},
		{"keep_last 0 with an open call at the end", "U A U A*2 T", 0, 0, true, "[U A] U A*2 T"},
		{"system message is a turn start", "U A* T S A* T", 0, 3, true, "[U A* T] S A* T"},
		{"previous summary is the first archived", "Σ A U A U A", 0, 2, true, "[Σ A U A] U A"},
		{"keep_first inside a pair at the end", "U A*3 T T T", 2, 1, true, ""},
		{"prefix extension reaches the plain cut", "U A* T A U A*2 T T A", 6, 1, true, ""},
		{"plain cut inside the pair after the prefix", "U A* T A U A* T A", 5, 2, true, "U A* T A U [A* T] A"},
		{"prefix extension passes the plain cut", "U A*3 T T T A", 2, 3, true, ""},
		{"keep_first beyond the end", "U A", 5, 0, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := build(tt.pattern)
			lo, cut, ok := split(msgs, tt.keepFirst, tt.keepLast, tt.preferUser)
			got := ""
			if ok {
				got = shape(msgs, lo, cut)
			}
			want := tt.want
			if want != "" {
				want = stripSigma(want)
			}
			if got != want {
				t.Errorf("split(%q, %d, %d) = %q, want %q", tt.pattern, tt.keepFirst, tt.keepLast, got, want)
			}
		})
	}
}

// stripSigma maps the Σ token to the U that shape prints for it.
func stripSigma(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == 'Σ' {
			out[i] = 'U'
		}
	}
	return string(out)
}
