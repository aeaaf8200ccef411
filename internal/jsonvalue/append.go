package jsonvalue

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Append appends Encode's encoding of v to dst without reflection, for
// the values events and messages hold on every agent loop step. It
// reports false, with dst as it was, for what it leaves to Encode: a
// value of another Go type, a float that is NaN or infinite (an error
// there), or a string that needs escaping beyond the plain cases. Its
// output is byte for byte Encode's (TestAppendIsEncode, FuzzAppend).
func Append(dst []byte, v any) ([]byte, bool) {
	n := len(dst)
	out, ok := appendValue(dst, v)
	if !ok {
		return dst[:n], false
	}
	return out, true
}

func appendValue(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case string:
		return AppendString(dst, v), true
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case int:
		return strconv.AppendInt(dst, int64(v), 10), true
	case float64:
		return appendFloat(dst, v)
	case []any:
		if v == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, x := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, x); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		return appendObject(dst, v)
	}
	return dst, false
}

// appendObject appends m with its keys sorted, as encoding/json does.
func appendObject(dst []byte, m map[string]any) ([]byte, bool) {
	if m == nil {
		return append(dst, "null"...), true
	}
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, m[k]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// AppendString appends s as a JSON string exactly as encoding/json writes
// it (HTML-safe: <, > and & escaped; invalid UTF-8 replaced).
func AppendString(dst []byte, s string) []byte {
	if plain(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}

// plain reports whether s is printable ASCII that encoding/json writes
// as it is: no quote, backslash, control character, <, > or &, nor any
// byte from utf8.RuneSelf up (those are checked by encoding/json).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendFloat appends f as exactFloat encodes it: as encoding/json writes
// a float64 (its shortest form, in exponent form below 1e-6 and from 1e21
// on, with a one-digit negative exponent written without its 0), with
// ".0" added when that has neither a fraction nor an exponent. NaN and
// the infinities are refused, as encoding/json refuses them
// (FuzzAppendFloat checks it against exactFloat.MarshalJSON).
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	start := len(dst)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1] // e-09 is written e-9
			return dst[:n-1], true
		}
		return dst, true
	}
	for _, c := range dst[start:] {
		if c == '.' {
			return dst, true
		}
	}
	return append(dst, ".0"...), true
}
