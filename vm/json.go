package vm

import (
	"fmt"

	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// jsonModule is go.starlark.net's json module with the nesting limit of
// skein's data (jsonvalue.MaxDepth) checked first: its encoder and decoder
// recurse without a bound, and a value nested a million levels deep
// overflows the Go stack, which no recover can catch.
var jsonModule = &starlarkstruct.Module{
	Name: "json",
	Members: starlark.StringDict{
		"encode":        boundedJSON("encode", checkValueDepth),
		"encode_indent": boundedJSON("encode_indent", checkValueDepth),
		"decode":        boundedJSON("decode", checkTextDepth),
		"indent":        boundedJSON("indent", checkTextDepth),
	},
}

// boundedJSON wraps json.Module's member name: check vets its first
// argument before the original runs.
func boundedJSON(name string, check func(starlark.Value) error) *starlark.Builtin {
	orig := json.Module.Members[name].(*starlark.Builtin)
	return starlark.NewBuiltin(orig.Name(), func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if err := check(args[0]); err != nil {
				return nil, fmt.Errorf("%s: %w", b.Name(), err)
			}
		}
		return starlark.Call(thread, orig, args, kwargs)
	})
}

// checkTextDepth checks a JSON text argument.
func checkTextDepth(v starlark.Value) error {
	var text string
	switch v := v.(type) {
	case starlark.String:
		text = string(v)
	case starlark.Bytes:
		text = string(v)
	default:
		return nil // the original reports the type
	}
	return jsonvalue.CheckTextDepth([]byte(text))
}

// checkValueDepth checks a value about to be encoded.
func checkValueDepth(v starlark.Value) error {
	if path, deep := tooDeep(v, 0); deep {
		return &jsonvalue.DepthError{Path: "x" + path}
	}
	return nil
}

// tooDeep reports whether v, inside depth lists, dicts and structs, nests
// past jsonvalue.MaxDepth, and the path from v to where. It recurses at
// most MaxDepth levels; the path is built only on the way out of a
// refusal.
func tooDeep(v starlark.Value, depth int) (string, bool) {
	if m, ok := v.(Materializer); ok {
		v = m.Materialize()
	}
	switch v.(type) {
	case *starlark.List, starlark.Tuple, *starlark.Dict, *starlarkstruct.Struct:
		if depth >= jsonvalue.MaxDepth {
			return "", true
		}
	default:
		return "", false
	}
	switch v := v.(type) {
	case starlark.Indexable: // list, tuple
		for i := range v.Len() {
			if path, deep := tooDeep(v.Index(i), depth+1); deep {
				return fmt.Sprintf("[%d]%s", i, path), true
			}
		}
	case *starlark.Dict:
		for _, item := range v.Items() {
			if path, deep := tooDeep(item[1], depth+1); deep {
				return fmt.Sprintf("[%s]%s", item[0], path), true
			}
		}
	case *starlarkstruct.Struct:
		for _, n := range v.AttrNames() {
			x, _ := v.Attr(n)
			if path, deep := tooDeep(x, depth+1); deep {
				return "." + n + path, true
			}
		}
	}
	return "", false
}
