package jsonvalue

import (
	"bytes"
	"math"
	"testing"
)

// appendCases are values Append writes and values it leaves to Encode.
var appendCases = []any{
	nil, true, false, "", "plain text", int64(-42), 7, 0.0, 2.0, -1.5, 1e21, 1e-7, 123456789.125,
	"quote \" backslash \\ tab \t newline \n nul \x00 bell \x07 <b>&amp;</b>",
	"é, 日本語, U+2028 \u2028 and U+2029 \u2029, invalid \xff\xfe",
	[]any{}, []any(nil), []any{int64(1), "two", 3.0, nil, []any{false}},
	[]string{"a", "<b>"}, []string(nil), // left to Encode
	map[string]any{}, map[string]any(nil),
	map[string]any{"b": int64(1), "a": "x", "é": 1.0, "<": map[string]any{"z": []any{}, "y": nil}},
	map[string]any{"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8,
		"k9": 9, "k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16, "k17": 17},
	map[string]any{"other": map[string]string{"a": "b"}}, // left to Encode
	[]any{int32(5)}, // left to Encode
}

// TestAppendIsEncode checks that Encode (Append's fast path) writes what
// encoding/json writes, and Append's refusals leave dst as it was.
func TestAppendIsEncode(t *testing.T) {
	for _, v := range appendCases {
		want, werr := encodeSlow(v)
		got, err := Encode(v)
		if !bytes.Equal(got, want) || (err == nil) != (werr == nil) {
			t.Errorf("Encode(%#v) = %s, %v; encoding/json: %s, %v", v, got, err, want, werr)
		}
		prefix := []byte("prefix:")
		if out, ok := Append(prefix, v); ok && string(out) != "prefix:"+string(want) {
			t.Errorf("Append(%#v) = %s, want prefix:%s", v, out, want)
		} else if !ok && string(out) != "prefix:" {
			t.Errorf("Append(%#v) refused but left %q", v, out)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := Encode(map[string]any{"f": f}); err == nil {
			t.Errorf("Encode(%v) succeeded", f)
		}
	}
}

// FuzzAppend checks Encode against encoding/json on every value the
// decoder reads from the input, and on the input as a string.
func FuzzAppend(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x<y",null,true],"b":{"c":"\u2028\ud800"}}`))
	f.Add([]byte("\xff\"\\\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		values := []any{string(data)}
		if v, err := Decode(data); err == nil {
			values = append(values, v)
		}
		for _, v := range values {
			want, werr := encodeSlow(v)
			got, err := Encode(v)
			if !bytes.Equal(got, want) || (err == nil) != (werr == nil) {
				t.Fatalf("Encode(%#v) = %s, %v; encoding/json: %s, %v", v, got, err, want, werr)
			}
		}
	})
}

// FuzzAppendFloat checks appendFloat against exactFloat.MarshalJSON,
// which asks encoding/json, on every float64's bits.
func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1.5, 100, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 5e-324, 1e20, 1e21,
		123456789e13, math.MaxFloat64, -math.MaxFloat64, 0.1, 1.0 / 3, math.NaN(), math.Inf(-1)} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		want, err := exactFloat(x).MarshalJSON()
		got, ok := appendFloat([]byte("p"), x)
		if ok != (err == nil) || (ok && string(got) != "p"+string(want)) {
			t.Fatalf("appendFloat(%v) = %s, %v; encoding/json: %s, %v", x, got, ok, want, err)
		}
	})
}
