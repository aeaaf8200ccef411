package sessions

import (
	"fmt"
	"testing"
)

// TestWhereConds: the conditions of a filter expression that backends
// apply, and whether they are all of it.
func TestWhereConds(t *testing.T) {
	for _, c := range []struct {
		src   string
		conds string
		exact bool
	}{
		{`status == "active"`, `[status == "active"]`, true},
		{`metadata.user == "ann" && turns > 3`, `[metadata.user == "ann" turns > 3]`, true},
		{`3 < turns and "x" != parent`, `[turns > 3 parent != "x"]`, true},
		{`status in ["active", "error"] && messages >= 2`, `[status in []string{"active", "error"} messages >= 2]`, true},
		{`metadata.user == "ann" || turns > 3`, `[]`, false},
		{`metadata.user == "ann" && title contains "x"`, `[metadata.user == "ann"]`, false},
		{`metadata.n > 3`, `[]`, false},         // may fail on a missing key: Go decides
		{`metadata.user == 5`, `[]`, false},     // not a string
		{`metadata["a b"] == "x"`, `[]`, false}, // not a plain key
		{`metadata?.user == "x"`, `[]`, false},
		{`!(status == "active")`, `[]`, false},
		{`turns > -1`, `[]`, false},
	} {
		w, err := CompileWhere(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		conds, exact := w.Conds()
		if got := fmt.Sprint(conds); got != c.conds || exact != c.exact {
			t.Errorf("%s: conds %s exact %v, want %s %v", c.src, got, exact, c.conds, c.exact)
		}
	}
}
