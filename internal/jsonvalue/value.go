// Package jsonvalue holds skein's JSON values and the one-pass decoder
// that reads them fast.
//
// Free-form data (message metadata and usage, tool call arguments, event
// fields, session metadata) holds "JSON values": nil, bool, int64,
// float64, string, []any of JSON values, or map[string]any of JSON
// values. Decode keeps integers as int64 and Encode writes whole-number
// floats with a fraction, so data round-trips through storage unchanged.
// MaxDepth bounds how deeply they nest wherever they enter skein.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Decode decodes data into a JSON value, keeping integers as int64.
// A value nested more than MaxDepth levels is a DepthError.
func Decode(data []byte) (any, error) {
	v, err := fast(data)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, ErrDeep) {
		return nil, &DepthError{Path: deepPath(data)}
	}
	if v, err = decodeSlow(data); err != nil {
		if path := deepPath(data); path != "" {
			return nil, &DepthError{Path: path}
		}
		return nil, err
	}
	if err := checkDepth(v, 0); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeSlow is Decode with encoding/json: what the fast path
// gives up on (see parse.go) and the reference it is tested against.
func decodeSlow(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after JSON value")
	}
	return normalizeNumbers(v), nil
}

// Encode encodes a JSON value so that Decode returns it unchanged:
// a float64 with an integral value is written with a fraction ("2.0", not
// "2"), which Decode reads back as a float64 rather than an int64.
func Encode(v any) ([]byte, error) {
	if out, ok := Append(nil, v); ok {
		return out, nil
	}
	return encodeSlow(v)
}

// encodeSlow is Encode with encoding/json: what Append gives up on, and
// the reference it is tested against.
func encodeSlow(v any) ([]byte, error) {
	return json.Marshal(exactFloats(v))
}

// Format encodes a JSON value on one line as Encode does, without
// escaping <, > and & (Encode writes them as \u003c ...): for people
// to read.
func Format(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exactFloats(v)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// exactFloat is a float64 that encodes with a fraction or an exponent.
type exactFloat float64

func (f exactFloat) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(float64(f))
	if err != nil {
		return nil, err
	}
	if !bytes.ContainsAny(b, ".eE") {
		b = append(b, ".0"...)
	}
	return b, nil
}

// exactFloats returns v with every float64 inside it made an exactFloat.
// Containers without floats are returned as they are, not copied.
func exactFloats(v any) any {
	switch v := v.(type) {
	case float64:
		return exactFloat(v)
	case []any:
		if !HasFloat(v) {
			return v
		}
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = exactFloats(x)
		}
		return out
	case map[string]any:
		return ExactObject(v)
	}
	return v
}

// ExactObject is exactFloats for a JSON object.
func ExactObject(m map[string]any) map[string]any {
	if !HasFloat(m) {
		return m
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = exactFloats(x)
	}
	return out
}

// HasFloat reports whether the JSON value v holds a float64.
func HasFloat(v any) bool {
	switch v := v.(type) {
	case float64:
		return true
	case []any:
		for _, x := range v {
			if HasFloat(x) {
				return true
			}
		}
	case map[string]any:
		for _, x := range v {
			if HasFloat(x) {
				return true
			}
		}
	}
	return false
}

// DecodeObject decodes data that must hold a JSON object.
func DecodeObject(data []byte) (map[string]any, error) {
	v, err := Decode(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want a JSON object", TypeName(v))
	}
	return m, nil
}

func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = normalizeNumbers(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = normalizeNumbers(v[k])
		}
		return v
	}
	return v
}

// Check reports an error if v is not a JSON value as defined above
// (for example a NaN float or a value of another Go type) or nests more
// than MaxDepth levels (a DepthError).
func Check(v any) error {
	if err := checkDepth(v, 0); err != nil {
		return err
	}
	return check(v)
}

// check is Check once the depth is known to be bounded.
func check(v any) error {
	switch v := v.(type) {
	case nil, bool, int64, string:
		return nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%v is not representable in JSON", v)
		}
		return nil
	case []any:
		for _, x := range v {
			if err := check(x); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, x := range v {
			if err := check(x); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%T is not a JSON value", v)
}

// TypeName names the JSON type of a JSON value, for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int64, float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// CloneObject deep-copies a JSON object (nil stays nil).
func CloneObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = Clone(v)
	}
	return out
}

// Clone deep-copies a JSON value.
func Clone(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Clone(x)
		}
		return out
	case map[string]any:
		return CloneObject(v)
	}
	return v
}
