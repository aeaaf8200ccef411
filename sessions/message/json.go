package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
)

// timeFormat is how created_at is written: RFC 3339 with the nanoseconds
// a time has (package sessions writes every timestamp so).
const timeFormat = time.RFC3339Nano

// messageJSON is the stored and exported JSON form of a Message; its keys
// are the message dict keys scripts use.
type messageJSON struct {
	ID         string          `json:"id,omitempty"`
	CreatedAt  string          `json:"created_at,omitempty"`
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
	if out, ok := m.appendJSON(nil); ok {
		return out, nil
	}
	return m.marshalSlow()
}

// appendJSON appends MarshalJSON's encoding of m to dst without
// reflection (jsonvalue.Append), reporting false for what it leaves to
// marshalSlow: content blocks, and data jsonvalue.Append refuses. Its
// output is byte for byte marshalSlow's (TestAppendJSONIsMarshal).
func (m *Message) appendJSON(dst []byte) ([]byte, bool) {
	if m.Blocks != nil {
		return dst, false
	}
	str := func(key, v string) {
		if v != "" {
			dst = append(dst, `,"`+key+`":`...)
			dst = jsonvalue.AppendString(dst, v)
		}
	}
	ok := true
	object := func(key string, v map[string]any) {
		if ok && len(v) > 0 {
			dst = append(dst, `,"`+key+`":`...)
			dst, ok = jsonvalue.Append(dst, v)
		}
	}
	dst = append(dst, '{')
	if m.ID != "" {
		dst = append(dst, `"id":`...)
		dst = jsonvalue.AppendString(dst, m.ID)
		dst = append(dst, ',')
	}
	if !m.CreatedAt.IsZero() {
		dst = append(dst, `"created_at":"`...)
		dst = m.CreatedAt.UTC().AppendFormat(dst, timeFormat)
		dst = append(dst, `",`...)
	}
	dst = append(dst, `"role":`...)
	dst = jsonvalue.AppendString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	dst = jsonvalue.AppendString(dst, m.Text)
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = jsonvalue.AppendString(dst, c.ID)
			dst = append(dst, `,"name":`...)
			dst = jsonvalue.AppendString(dst, c.Name)
			dst = append(dst, `,"arguments":`...)
			if dst, ok = jsonvalue.Append(dst, c.Arguments); !ok {
				return dst, false
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	str("tool_call_id", m.ToolCallID)
	str("name", m.Name)
	if m.IsError {
		dst = append(dst, `,"is_error":true`...)
	}
	object("metadata", m.Metadata)
	str("model", m.Model)
	object("usage", m.Usage)
	return append(dst, '}'), ok
}

// marshalSlow is MarshalJSON with encoding/json: what appendJSON leaves
// to it, and the reference it is tested against.
func (m Message) marshalSlow() ([]byte, error) {
	j := messageJSON{ID: m.ID, CreatedAt: formatCreated(m.CreatedAt), Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name,
		IsError: m.IsError, Metadata: jsonvalue.ExactObject(m.Metadata), Model: m.Model, Usage: jsonvalue.ExactObject(m.Usage)}
	if slices.ContainsFunc(m.ToolCalls, func(c ToolCall) bool { return jsonvalue.HasFloat(c.Arguments) }) {
		j.ToolCalls = make([]ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Arguments = jsonvalue.ExactObject(c.Arguments)
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

// formatCreated writes a message's time as the JSON form has it: RFC 3339
// in UTC with the nanoseconds it has, "" for the zero time.
func formatCreated(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// parseCreated is the inverse of formatCreated.
func parseCreated(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("created_at: %q is not an RFC 3339 time", s)
	}
	return t.UTC(), nil
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
	if errors.Is(err, jsonvalue.ErrDeep) {
		return jsonvalue.CheckTextDepth(data)
	}
	if err := m.unmarshalSlow(data); err != nil {
		if derr := jsonvalue.CheckTextDepth(data); derr != nil {
			return derr // the path from the message, not from a field
		}
		return err
	}
	return nil
}

// unmarshalSlow is UnmarshalJSON with encoding/json: what the fast path
// gives up on (see fastMessage) and the reference it is tested against.
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
	created, err := parseCreated(j.CreatedAt)
	if err != nil {
		return err
	}
	*m = Message{ID: j.ID, CreatedAt: created, Role: j.Role, ToolCallID: j.ToolCallID, Name: j.Name, IsError: j.IsError, Model: j.Model}
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
	if j.ToolCalls != nil {
		m.ToolCalls = make([]ToolCall, 0, len(j.ToolCalls))
	}
	for _, c := range j.ToolCalls {
		call := ToolCall{ID: c.ID, Name: c.Name, Arguments: map[string]any{}}
		if len(c.Arguments) > 0 && string(c.Arguments) != "null" {
			args, err := jsonvalue.DecodeObject(c.Arguments)
			if err != nil {
				return fmt.Errorf("tool call '%s' arguments: %v", c.ID, err)
			}
			call.Arguments = args
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
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
	return jsonvalue.DecodeObject(raw)
}

// Message keys, as bits for catching repeated keys.
const (
	keyID = 1 << iota
	keyCreatedAt
	keyRole
	keyContent
	keyToolCalls
	keyToolCallID
	keyName
	keyIsError
	keyMetadata
	keyModel
	keyUsage
)

// fastMessage decodes the JSON form of a message into m in one pass (see
// jsonvalue.Parser). It gives up with jsonvalue.ErrSlow on anything
// MarshalJSON does not write, and UnmarshalJSON then decodes with
// encoding/json, so the result is always what encoding/json gives
// (FuzzFastMessage checks it).
func fastMessage(data []byte, m *Message) error {
	p := jsonvalue.NewParser(data)
	*m = Message{}
	seen := 0
	once := func(bit int) error {
		if seen&bit != 0 {
			return jsonvalue.ErrSlow
		}
		seen |= bit
		return nil
	}
	err := p.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "id":
			if err = once(keyID); err == nil {
				m.ID, err = p.Str()
			}
		case "created_at":
			if err = once(keyCreatedAt); err == nil {
				var s string
				if s, err = p.Str(); err == nil {
					if m.CreatedAt, err = parseCreated(s); err != nil {
						err = jsonvalue.ErrSlow // the slow path reports it
					}
				}
			}
		case "role":
			if err = once(keyRole); err == nil {
				m.Role, err = p.Str()
			}
		case "content":
			if err = once(keyContent); err == nil {
				err = readContent(p, m)
			}
		case "tool_calls":
			if err = once(keyToolCalls); err == nil {
				err = readToolCalls(p, m)
			}
		case "tool_call_id":
			if err = once(keyToolCallID); err == nil {
				m.ToolCallID, err = p.Str()
			}
		case "name":
			if err = once(keyName); err == nil {
				m.Name, err = p.Str()
			}
		case "is_error":
			if err = once(keyIsError); err == nil {
				m.IsError, err = p.Bool()
			}
		case "metadata":
			if err = once(keyMetadata); err == nil {
				m.Metadata, err = p.OptionalObject()
			}
		case "model":
			if err = once(keyModel); err == nil {
				m.Model, err = p.Str()
			}
		case "usage":
			if err = once(keyUsage); err == nil {
				m.Usage, err = p.OptionalObject()
			}
		default:
			err = jsonvalue.ErrSlow
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.End()
}

// readContent reads a message's content: a string, a list of blocks or null.
func readContent(p *jsonvalue.Parser, m *Message) error {
	switch p.Peek() {
	case '"':
		var err error
		m.Text, err = p.Str()
		return err
	case 'n':
		return p.Literal("null")
	case '[':
		m.Blocks = []Block{}
		return p.Array(func() error {
			var b Block
			seen := map[string]bool{}
			err := p.Object(func(key []byte) error {
				k := string(key)
				if seen[k] {
					return jsonvalue.ErrSlow
				}
				seen[k] = true
				var dst *string
				switch k {
				case "type":
					dst = &b.Type
				case "text":
					dst = &b.Text
				case "thinking":
					dst = &b.Thinking
				case "signature":
					dst = &b.Signature
				case "origin":
					dst = &b.Origin
				case "media_type":
					dst = &b.MediaType
				case "data":
					dst = &b.Data
				default:
					return jsonvalue.ErrSlow
				}
				var err error
				*dst, err = p.Str()
				return err
			})
			m.Blocks = append(m.Blocks, b)
			return err
		})
	}
	return jsonvalue.ErrSlow
}

// readToolCalls reads a message's tool calls (a list, not null).
func readToolCalls(p *jsonvalue.Parser, m *Message) error {
	if p.Peek() != '[' {
		return jsonvalue.ErrSlow
	}
	m.ToolCalls = []ToolCall{} // [] stays an empty list, which CheckShape refuses
	return p.Array(func() error {
		call := ToolCall{}
		seen := 0
		err := p.Object(func(key []byte) error {
			var bit int
			var err error
			switch string(key) {
			case "id":
				bit = 1
				call.ID, err = p.Str()
			case "name":
				bit = 2
				call.Name, err = p.Str()
			case "arguments":
				bit = 4
				call.Arguments, err = p.OptionalObject()
			default:
				return jsonvalue.ErrSlow
			}
			if seen&bit != 0 {
				return jsonvalue.ErrSlow
			}
			seen |= bit
			return err
		})
		if call.Arguments == nil {
			call.Arguments = map[string]any{}
		}
		m.ToolCalls = append(m.ToolCalls, call)
		return err
	})
}

// CheckKeys refuses a decoded message object m with a key that no
// message has (Keys, the keys MarshalJSON writes): an import keeps
// nothing it would silently drop. The error is worded as a message
// dict's with an unknown key.
func CheckKeys(m map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(Keys, k) {
			return fmt.Errorf("unknown message key '%s' (expected one of: %s)", k, strings.Join(Keys, ", "))
		}
	}
	return nil
}

// CheckValues checks that m's free-form data (tool call arguments,
// metadata, usage) hold only JSON values (see internal/jsonvalue), which a
// message decoded from JSON always does and one built in Go may not.
func CheckValues(m *Message) error {
	for _, c := range m.ToolCalls {
		if err := jsonvalue.Check(map[string]any(c.Arguments)); err != nil {
			return fmt.Errorf("tool call %s arguments: %w", quoted(c.ID), err)
		}
	}
	if err := jsonvalue.Check(map[string]any(m.Metadata)); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if err := jsonvalue.Check(map[string]any(m.Usage)); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return nil
}
