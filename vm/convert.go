package vm

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// ToStarlark converts a Go JSON value (nil, bool, int, int64, float64,
// json.Number, string, []any, []string, map[string]any,
// map[string]string) to a fresh, mutable Starlark value. A json.Number
// becomes an int when it is an integer (exactly, however large), else a
// float. Dict keys are inserted in sorted order so output is stable.
// Values of other types become their fmt %v string.
func ToStarlark(v any) starlark.Value {
	switch v := v.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(v)
	case json.Number:
		return numberToStarlark(v)
	case int:
		return starlark.MakeInt(v)
	case int64:
		return starlark.MakeInt64(v)
	case float64:
		return starlark.Float(v)
	case string:
		return starlark.String(v)
	case starlark.Value:
		return v
	case []any:
		elems := make([]starlark.Value, len(v))
		for i, x := range v {
			elems[i] = ToStarlark(x)
		}
		return starlark.NewList(elems)
	case []string:
		elems := make([]starlark.Value, len(v))
		for i, x := range v {
			elems[i] = starlark.String(x)
		}
		return starlark.NewList(elems)
	case map[string]any:
		d := starlark.NewDict(len(v))
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = d.SetKey(starlark.String(k), ToStarlark(v[k]))
		}
		return d
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = x
		}
		return ToStarlark(m)
	}
	return starlark.String(fmt.Sprint(v))
}

// numberToStarlark converts a JSON number: an int if it has no fraction
// or exponent, else a float.
func numberToStarlark(n json.Number) starlark.Value {
	if i, err := n.Int64(); err == nil {
		return starlark.MakeInt64(i)
	}
	if !strings.ContainsAny(string(n), ".eE") {
		if b, ok := new(big.Int).SetString(string(n), 10); ok {
			return starlark.MakeBigInt(b)
		}
	}
	f, _ := strconv.ParseFloat(string(n), 64) // ±Inf when out of range
	return starlark.Float(f)
}

// Secret is implemented by Starlark values that hold a secret. FromStarlark
// refuses them, so a secret never becomes data: a message, metadata, an
// event, a tool result, a provider request.
type Secret interface {
	starlark.Value
	// SecretName names the secret (never its value).
	SecretName() string
}

// SecretError is FromStarlark's refusal of a Secret.
type SecretError struct {
	Path string // where in the value: "x", "x.key", "x[2]"
	Name string // the secret's name
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("%s: <secret %s> is a secret, which never becomes data (pass it only in http headers or exec env)", e.Path, e.Name)
}

// FromStarlark converts a Starlark value to a Go JSON value: None, bool,
// int (to int64), float, string, list or tuple (to []any), dict with
// string keys and struct (to map[string]any), a Materializer as the
// value it stands for. Anything else (a Secret
// included), a NaN, an int too large for int64 or lists and dicts nested
// more than jsonvalue.MaxDepth levels (a list that contains itself
// included) is an error naming the path within v ("x", "x.key", "x[2]"),
// using name for the top level.
func FromStarlark(v starlark.Value, name string) (any, error) {
	return fromStarlark(v, name, 0)
}

// fromStarlark is FromStarlark of a value inside depth lists and dicts.
func fromStarlark(v starlark.Value, name string, depth int) (any, error) {
	if m, ok := v.(Materializer); ok {
		v = m.Materialize()
	}
	switch v.(type) {
	case *starlark.List, starlark.Tuple, *starlark.Dict, *starlarkstruct.Struct:
		if depth >= jsonvalue.MaxDepth {
			return nil, &jsonvalue.DepthError{Path: name}
		}
		depth++
	}
	switch v := v.(type) {
	case Secret:
		return nil, &SecretError{Path: name, Name: v.SecretName()}
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.Int:
		i, ok := v.Int64()
		if !ok {
			return nil, fmt.Errorf("%s: integer %s is too large", name, v.BigInt().Text(10))
		}
		return i, nil
	case starlark.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s: %v is not representable in JSON", name, v)
		}
		return f, nil
	case starlark.String:
		return string(v), nil
	case *starlark.List:
		return fromSequence(v, name, depth)
	case starlark.Tuple:
		return fromSequence(v, name, depth)
	case *starlark.Dict:
		out := make(map[string]any, v.Len())
		for _, item := range v.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: dict key %s is a %s, want string", name, item[0], item[0].Type())
			}
			x, err := fromStarlark(item[1], name+"."+string(k), depth)
			if err != nil {
				return nil, err
			}
			out[string(k)] = x
		}
		return out, nil
	case *starlarkstruct.Struct:
		d := starlark.StringDict{}
		v.ToStringDict(d)
		out := make(map[string]any, len(d))
		for k, x := range d {
			y, err := fromStarlark(x, name+"."+k, depth)
			if err != nil {
				return nil, err
			}
			out[k] = y
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: got %s, want a JSON-encodable value (None, bool, int, float, string, list, dict)", name, v.Type())
}

func fromSequence(v starlark.Indexable, name string, depth int) (any, error) {
	out := make([]any, v.Len())
	for i := range out {
		x, err := fromStarlark(v.Index(i), fmt.Sprintf("%s[%d]", name, i), depth)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}
