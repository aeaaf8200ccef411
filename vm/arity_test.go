package vm

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

func TestCheckArity(t *testing.T) {
	globals, err := starlark.ExecFile(&starlark.Thread{}, "arity.star", `
none = lambda: 1
one = lambda e: 1
def two(a, b): pass
def opt(a, b = 1): pass
def var(*args): pass
def kwonly(a, *, k): pass
def kwopt(a, *, k = 1): pass
def kw(a, **kw): pass
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fn     string
		params []string
		want   string // "" for no error
	}{
		{"none", []string{"event"}, "lambda takes 0 positional arguments, but it is called with 1 (event)"},
		{"one", []string{"event"}, ""},
		{"one", nil, "lambda needs 1 positional argument, but it is called with none"},
		{"two", []string{"event"}, "two needs 2 positional arguments, but it is called with 1 (event)"},
		{"two", []string{"a", "b", "c"}, "two takes 2 positional arguments, but it is called with 3 (a, b, c)"},
		{"opt", []string{"a"}, ""},
		{"opt", []string{"a", "b"}, ""},
		{"var", []string{"a", "b", "c"}, ""},
		{"kwonly", []string{"a"}, "kwonly has a keyword-only parameter 'k' without a default, which is never given"},
		{"kwopt", []string{"a"}, ""},
		{"kw", []string{"a"}, ""},
	} {
		err := CheckArity(globals[tc.fn].(starlark.Callable), tc.params...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s%v: %v, want no error", tc.fn, tc.params, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s%v: %v, want %q", tc.fn, tc.params, err, tc.want)
		}
	}
	if err := CheckArity(starlark.NewBuiltin("print", nil), "x"); err != nil {
		t.Errorf("a builtin: %v", err)
	}
}
