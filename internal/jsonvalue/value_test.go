package jsonvalue

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestRoundTripKeepsNumberTypes checks that Encode then Decode gives back
// int64 and float64 values as they were, whole-number floats included.
func TestRoundTripKeepsNumberTypes(t *testing.T) {
	values := map[string]any{
		"int": int64(2), "float": 2.0, "neg": -3.0, "frac": 0.25, "big": 1e300, "tiny": 1e-9,
		"max": int64(math.MaxInt64), "list": []any{1.0, int64(1), "x", nil, true},
		"nested": map[string]any{"f": 10.0, "deeper": []any{map[string]any{"g": 7.0}}},
	}
	for _, v := range []any{2.0, -0.5, 1e21, []any{3.0}, values} {
		data, err := Encode(v)
		if err != nil {
			t.Fatalf("Encode(%v): %v", v, err)
		}
		back, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Errorf("Encode then Decode: got %#v from %s, want %#v", back, data, v)
		}
	}
}

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// TestDepthLimit: a JSON value nested more than MaxDepth levels is a
// DepthError naming its path wherever it is decoded or checked, and a
// million levels is an error, not a stack overflow.
func TestDepthLimit(t *testing.T) {
	if _, err := Decode([]byte(nested("[", "]", MaxDepth))); err != nil {
		t.Errorf("MaxDepth levels: %v", err)
	}
	for _, tc := range []struct {
		name, text, path string
	}{
		{"lists", nested("[", "]", MaxDepth+1), "[0]"},
		{"objects", `{"a":` + nested(`{"a":`, "}", MaxDepth) + "1}", ".a.a"},
		{"a million", nested("[", "]", 1_000_000), "[0][0]"},
		{"slow path", `{"A b":1,"x":[0,` + nested("[", "]", MaxDepth) + `]}`, `.x[1][0]`},
	} {
		_, err := Decode([]byte(tc.text))
		var de *DepthError
		if !errors.As(err, &de) || !strings.HasPrefix(de.Path, tc.path) || !strings.Contains(err.Error(), "value nested deeper than 1000 levels") {
			t.Errorf("%s: Decode = %v, want a DepthError at %s...", tc.name, err, tc.path)
		}
	}
	var v any = []any{}
	for range MaxDepth - 1 {
		v = []any{v}
	}
	if err := Check(map[string]any{"k": v}); err == nil || !strings.HasPrefix(err.Error(), "at .k[0][0]") || !strings.HasSuffix(err.Error(), "[0]: value nested deeper than 1000 levels") {
		t.Errorf("Check = %v", err)
	}
	if err := Check(v); err != nil {
		t.Errorf("Check of MaxDepth levels = %v", err)
	}
}

// TestFastPathAgrees decodes texts that exercise the fast path's edges
// and checks that Decode gives what encoding/json gives, whether the fast
// path took them or not.
func TestFastPathAgrees(t *testing.T) {
	for _, text := range []string{`1`, `-2.5`, `"x"`, `[1,"a",{"b":null}]`, `{"a":{"b":[true,false]}}`, `{"a":1}{`, `nul`, `{"a":"\u12"}`, ` 7 `} {
		got, gotErr := Decode([]byte(text))
		want, wantErr := decodeSlow([]byte(text))
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s) = %#v, %v; encoding/json gives %#v, %v", text, got, gotErr, want, wantErr)
		}
	}
}

// FuzzFast checks that whatever the fast path decodes, it decodes as
// encoding/json does.
func FuzzFast(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",true,null,{}]}`, `-0`, `1e5`, `"\u00e9\n"`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, err := fast(data)
		if err != nil {
			return
		}
		slow, err := decodeSlow(data)
		if err != nil {
			t.Fatalf("%q: the fast path decoded what encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %#v, slow %#v", data, fast, slow)
		}
	})
}

// TestClone: a clone shares no list or object with the original.
func TestClone(t *testing.T) {
	orig := map[string]any{"a": []any{int64(1), map[string]any{"b": "c"}}, "d": 2.5}
	c := CloneObject(orig)
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone %#v of %#v", c, orig)
	}
	c["a"].([]any)[1].(map[string]any)["b"] = "changed"
	c["a"].([]any)[0] = int64(9)
	if orig["a"].([]any)[1].(map[string]any)["b"] != "c" || orig["a"].([]any)[0] != int64(1) {
		t.Errorf("changing the clone changed the original: %#v", orig)
	}
	if CloneObject(nil) != nil {
		t.Errorf("CloneObject(nil) is not nil")
	}
}
