package sessions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// JSON values.
//
// Free-form data in this package (message metadata and usage, tool call
// arguments, event fields) holds "JSON values": nil, bool, int64, float64,
// string, []any of JSON values, or map[string]any of JSON values. Decoding
// with DecodeJSON keeps integers as int64 so data round-trips through
// storage unchanged.

// DecodeJSON decodes data into a JSON value, keeping integers as int64.
// A value nested more than MaxDepth levels is a DepthError.
func DecodeJSON(data []byte) (any, error) {
	v, err := fastJSON(data)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, errDeep) {
		return nil, &DepthError{Path: deepPath(data)}
	}
	if v, err = decodeJSONSlow(data); err != nil {
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

// decodeJSONSlow is DecodeJSON with encoding/json: what the fast path
// gives up on (see jsonparse.go) and the reference it is tested against.
func decodeJSONSlow(data []byte) (any, error) {
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

// EncodeJSON encodes a JSON value so that DecodeJSON returns it unchanged:
// a float64 with an integral value is written with a fraction ("2.0", not
// "2"), which DecodeJSON reads back as a float64 rather than an int64.
func EncodeJSON(v any) ([]byte, error) {
	return json.Marshal(exactFloats(v))
}

// FormatJSON encodes a JSON value on one line as EncodeJSON does, without
// escaping <, > and & (EncodeJSON writes them as \u003c ...): for people
// to read.
func FormatJSON(v any) (string, error) {
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
		if !hasFloat(v) {
			return v
		}
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = exactFloats(x)
		}
		return out
	case map[string]any:
		return exactObject(v)
	}
	return v
}

// exactObject is exactFloats for a JSON object.
func exactObject(m map[string]any) map[string]any {
	if !hasFloat(m) {
		return m
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = exactFloats(x)
	}
	return out
}

func hasFloat(v any) bool {
	switch v := v.(type) {
	case float64:
		return true
	case []any:
		for _, x := range v {
			if hasFloat(x) {
				return true
			}
		}
	case map[string]any:
		for _, x := range v {
			if hasFloat(x) {
				return true
			}
		}
	}
	return false
}

// DecodeJSONObject decodes data that must hold a JSON object.
func DecodeJSONObject(data []byte) (map[string]any, error) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want a JSON object", JSONTypeName(v))
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

// CheckJSONValue reports an error if v is not a JSON value as defined above
// (for example a NaN float or a value of another Go type) or nests more
// than MaxDepth levels (a DepthError).
func CheckJSONValue(v any) error {
	if err := checkDepth(v, 0); err != nil {
		return err
	}
	return checkJSONValue(v)
}

// checkJSONValue is CheckJSONValue once the depth is known to be bounded.
func checkJSONValue(v any) error {
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
			if err := checkJSONValue(x); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, x := range v {
			if err := checkJSONValue(x); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%T is not a JSON value", v)
}

// JSONTypeName names the JSON type of a JSON value, for error messages.
func JSONTypeName(v any) string {
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

// messageJSON is the stored and exported JSON form of a Message; its keys
// are the message dict keys scripts use.
type messageJSON struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	Metadata   map[string]any  `json:"metadata,omitempty"`
	Model      string          `json:"model,omitempty"`
	Usage      map[string]any  `json:"usage,omitempty"`
}

// MarshalJSON encodes m with the message dict keys of the API.
func (m Message) MarshalJSON() ([]byte, error) {
	j := messageJSON{Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name,
		IsError: m.IsError, Metadata: exactObject(m.Metadata), Model: m.Model, Usage: exactObject(m.Usage)}
	if slices.ContainsFunc(m.ToolCalls, func(c ToolCall) bool { return hasFloat(c.Arguments) }) {
		j.ToolCalls = make([]ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Arguments = exactObject(c.Arguments)
			j.ToolCalls[i] = c
		}
	}
	var err error
	if m.Blocks != nil {
		j.Content, err = json.Marshal(m.Blocks)
	} else {
		j.Content, err = json.Marshal(m.Text)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the form MarshalJSON writes. Numbers inside
// metadata, usage and tool arguments are decoded as JSON values (int64 for
// integers).
func (m *Message) UnmarshalJSON(data []byte) error {
	orig := *m
	err := fastMessage(data, m)
	if err == nil {
		return nil
	}
	*m = orig
	if errors.Is(err, errDeep) {
		return CheckJSONDepth(data)
	}
	if err := m.unmarshalSlow(data); err != nil {
		if derr := CheckJSONDepth(data); derr != nil {
			return derr // the path from the message, not from a field
		}
		return err
	}
	return nil
}

// unmarshalSlow is UnmarshalJSON with encoding/json: what the fast path
// gives up on (see jsonparse.go) and the reference it is tested against.
func (m *Message) unmarshalSlow(data []byte) error {
	var j struct {
		messageJSON
		ToolCalls []struct {
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"tool_calls"`
		Metadata json.RawMessage `json:"metadata"`
		Usage    json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*m = Message{Role: j.Role, ToolCallID: j.ToolCallID, Name: j.Name, IsError: j.IsError, Model: j.Model}
	if len(j.Content) > 0 && j.Content[0] == '[' {
		if err := json.Unmarshal(j.Content, &m.Blocks); err != nil {
			return err
		}
		if m.Blocks == nil {
			m.Blocks = []Block{}
		}
	} else if len(j.Content) > 0 && string(j.Content) != "null" {
		if err := json.Unmarshal(j.Content, &m.Text); err != nil {
			return err
		}
	}
	for _, c := range j.ToolCalls {
		call := ToolCall{ID: c.ID, Name: c.Name, Arguments: map[string]any{}}
		if len(c.Arguments) > 0 && string(c.Arguments) != "null" {
			args, err := DecodeJSONObject(c.Arguments)
			if err != nil {
				return fmt.Errorf("tool call %q arguments: %v", c.ID, err)
			}
			call.Arguments = args
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
	var err error
	if m.Metadata, err = optionalObject(j.Metadata); err != nil {
		return fmt.Errorf("metadata: %v", err)
	}
	if m.Usage, err = optionalObject(j.Usage); err != nil {
		return fmt.Errorf("usage: %v", err)
	}
	return nil
}

func optionalObject(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return DecodeJSONObject(raw)
}
