package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidate(t *testing.T) {
	sch, err := Compile(decode(t, `{
		"type": "object", "required": ["a"], "additionalProperties": false,
		"$defs": {"pos": {"type": "integer", "minimum": 1}},
		"properties": {
			"a": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
			"n": {"$ref": "#/$defs/pos"},
			"l": {"type": "array", "items": {"type": "number"}, "maxItems": 2},
			"e": {"enum": ["x", 1]},
			"u": {"type": ["string", "null"]},
			"m": {"type": "string", "format": "email"},
			"o": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"a": "ok"}, ""},
		{map[string]any{"a": "ok", "n": 3.0, "l": []any{1.5, int64(2)}, "e": int64(1), "u": nil, "m": "a@b.c", "o": int64(2)}, ""},
		{map[string]any{}, "arguments: missing required property 'a'"},
		{map[string]any{"a": "x"}, "arguments.a: is 1 characters long, want at least 2"},
		{map[string]any{"a": "OK"}, "arguments.a: 'OK' does not match pattern '^[a-z]+$'"},
		{map[string]any{"a": "ok", "n": int64(0)}, "arguments.n: 0 is less than the minimum 1"},
		{map[string]any{"a": "ok", "n": 1.5}, "arguments.n: got number, want integer"},
		{map[string]any{"a": "ok", "l": []any{"s"}}, "arguments.l[0]: got string, want number"},
		{map[string]any{"a": "ok", "l": []any{1.0, 2.0, 3.0}}, "arguments.l: has 3 items, want at most 2"},
		{map[string]any{"a": "ok", "e": "y"}, "arguments.e: value must be one of 'x', 1"},
		{map[string]any{"a": "ok", "u": int64(1)}, "arguments.u: got number, want null or string"},
		{map[string]any{"a": "ok", "m": "nope"}, "arguments.m: 'nope' is not valid email: missing @"},
		{map[string]any{"a": "ok", "o": true}, "arguments.o: matches none of the oneOf alternatives:; arguments.o: got boolean, want string; arguments.o: got boolean, want integer"},
		{map[string]any{"a": "ok", "z": true}, "arguments: unexpected property 'z' (expected: a, e, l, m, n, o, u)"},
	}
	for _, tc := range tests {
		err := sch.Validate("arguments", tc.args)
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Validate(%v) = %v, want %q", tc.args, err, tc.err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ schema, err string }{
		{`{"type": "strin"}`, "invalid JSON Schema: schema.type: "},
		{`{"minimum": "3"}`, "invalid JSON Schema: schema.minimum: got string, want number"},
		{`{"$ref": "#/$defs/missing"}`, "invalid JSON Schema: "},
		{`{"$ref": "other.json"}`, "is not supported (put the definition under $defs)"},
		{`{"pattern": "("}`, "invalid JSON Schema: "},
	}
	for _, tc := range tests {
		_, err := Compile(decode(t, tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Compile(%s) = %v, want error containing %q", tc.schema, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), location) {
			t.Errorf("Compile(%s) error shows the internal location: %v", tc.schema, err)
		}
	}
}

func TestBooleanSchema(t *testing.T) {
	if err := Validate(true, "v", map[string]any{"x": int64(1)}); err != nil {
		t.Error(err)
	}
	if err := Validate(false, "v", int64(1)); err == nil {
		t.Error("false schema accepted a value")
	}
}
