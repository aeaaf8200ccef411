package sessions

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The fast path for decoding JSON.
//
// Loading a long session is mostly decoding its messages' JSON, and
// encoding/json spends most of that in reflection and in scanning every
// body two or three times (validate, then decode, then decode the content
// and each tool call's arguments again). parser decodes the forms this
// package writes (Message.MarshalJSON, EncodeJSON) in one pass. It gives
// up with errSlow on anything it does not expect — a key it does not
// know or in another case, a repeated key, a null where it wants a
// string, invalid UTF-8, a lone surrogate escape, malformed JSON — and
// the callers then decode with encoding/json, so the result is always
// what encoding/json gives (FuzzFastMessage checks it).

// errSlow makes a fast-path caller decode with encoding/json instead.
var errSlow = errors.New("sessions: not on the fast JSON path")

// parser reads one JSON text from b. depth counts the lists and objects
// open around the value being read: past MaxDepth, value gives up with
// errDeep.
type parser struct {
	b     []byte
	i     int
	depth int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (p *parser) peek() byte {
	p.space()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// expect consumes c after whitespace.
func (p *parser) expect(c byte) error {
	if p.peek() != c {
		return errSlow
	}
	p.i++
	return nil
}

// end checks that only whitespace follows.
func (p *parser) end() error {
	if p.peek() != 0 || p.i != len(p.b) {
		return errSlow
	}
	return nil
}

// literal consumes the literal word (true, false, null).
func (p *parser) literal(word string) error {
	p.space()
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return errSlow
	}
	p.i += len(word)
	return nil
}

// rawKey reads an object key without escapes and the colon after it; the
// result aliases b.
func (p *parser) rawKey() ([]byte, error) {
	if p.peek() != '"' {
		return nil, errSlow
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], p.expect(':')
		case c == '\\' || c < 0x20:
			return nil, errSlow
		}
	}
	return nil, errSlow
}

// object reads an object, calling field for each key with the parser
// positioned at the value, which field must consume.
func (p *parser) object(field func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		key, err := p.rawKey()
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return errSlow
		}
	}
}

// array reads an array, calling elem with the parser positioned at each
// element, which elem must consume.
func (p *parser) array(elem func() error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return errSlow
		}
	}
}

// str reads a string (not null).
func (p *parser) str() (string, error) {
	if p.peek() != '"' {
		return "", errSlow
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", errSlow
			}
			p.i = j + 1
			return string(s), nil
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", errSlow
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", errSlow
}

// escapedStr reads the rest of a string with escapes that starts at
// b[start].
func (p *parser) escapedStr(start int) (string, error) {
	out := make([]byte, 0, 2*(len(p.b)-start)/3+8)
	j := start
	for j < len(p.b) {
		c := p.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", errSlow
			}
			p.i = j + 1
			return string(out), nil
		case c < 0x20:
			return "", errSlow
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(p.b) {
			return "", errSlow
		}
		switch e := p.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.b[j+2:])
			if !ok {
				return "", errSlow
			}
			j += 6
			if utf16.IsSurrogate(r) {
				// A pair, or encoding/json's replacement rules apply.
				if len(p.b)-j < 6 || p.b[j] != '\\' || p.b[j+1] != 'u' {
					return "", errSlow
				}
				r2, ok := hex4(p.b[j+2:])
				if !ok {
					return "", errSlow
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", errSlow
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", errSlow
		}
		j += 2
	}
	return "", errSlow
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number as a JSON value: int64 when it has no fraction or
// exponent and fits, else float64 (as DecodeJSON's normalizeNumbers).
func (p *parser) number() (any, error) {
	p.space()
	start, j := p.i, p.i
	digits := func() int {
		k := j
		for j < len(p.b) && '0' <= p.b[j] && p.b[j] <= '9' {
			j++
		}
		return j - k
	}
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	switch {
	case j < len(p.b) && p.b[j] == '0':
		j++
	case digits() == 0:
		return nil, errSlow
	}
	integer := true
	if j < len(p.b) && p.b[j] == '.' {
		j++
		if digits() == 0 {
			return nil, errSlow
		}
		integer = false
	}
	if j < len(p.b) && (p.b[j] == 'e' || p.b[j] == 'E') {
		j++
		if j < len(p.b) && (p.b[j] == '+' || p.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, errSlow
		}
		integer = false
	}
	p.i = j
	s := string(p.b[start:j])
	if integer {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, errSlow
	}
	return f, nil
}

// boolean reads true or false.
func (p *parser) boolean() (bool, error) {
	switch p.peek() {
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	}
	return false, errSlow
}

// value reads any JSON value (see the JSON values of json.go).
func (p *parser) value() (any, error) {
	switch c := p.peek(); {
	case c == '"':
		return p.str()
	case c == '{' || c == '[':
		if p.depth >= MaxDepth {
			return nil, errDeep
		}
		p.depth++
		defer func() { p.depth-- }()
		if c == '{' {
			return p.objectValue()
		}
		out := []any{}
		err := p.array(func() error {
			v, err := p.value()
			out = append(out, v)
			return err
		})
		return out, err
	case c == 't' || c == 'f':
		return p.boolean()
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return nil, errSlow
}

// objectValue reads an object as a map of JSON values.
func (p *parser) objectValue() (map[string]any, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if p.peek() == '}' {
		p.i++
		return out, nil
	}
	for {
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if out[key], err = p.value(); err != nil {
			return nil, err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return out, nil
		default:
			return nil, errSlow
		}
	}
}

// optionalObjectValue reads an object or null (nil), as the top level
// of a JSON value (MaxDepth counts from it).
func (p *parser) optionalObjectValue() (map[string]any, error) {
	if p.peek() == 'n' {
		return nil, p.literal("null")
	}
	depth := p.depth
	p.depth = 1
	defer func() { p.depth = depth }()
	return p.objectValue()
}

// fastJSON decodes a whole JSON text as a JSON value.
func fastJSON(data []byte) (any, error) {
	p := parser{b: data}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	return v, p.end()
}

// Message keys, as bits for catching repeated keys.
const (
	keyRole = 1 << iota
	keyContent
	keyToolCalls
	keyToolCallID
	keyName
	keyIsError
	keyMetadata
	keyModel
	keyUsage
)

// fastMessage decodes the JSON form of a message into m.
func fastMessage(data []byte, m *Message) error {
	p := parser{b: data}
	*m = Message{}
	seen := 0
	once := func(bit int) error {
		if seen&bit != 0 {
			return errSlow
		}
		seen |= bit
		return nil
	}
	err := p.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "role":
			if err = once(keyRole); err == nil {
				m.Role, err = p.str()
			}
		case "content":
			if err = once(keyContent); err == nil {
				err = p.content(m)
			}
		case "tool_calls":
			if err = once(keyToolCalls); err == nil {
				err = p.toolCalls(m)
			}
		case "tool_call_id":
			if err = once(keyToolCallID); err == nil {
				m.ToolCallID, err = p.str()
			}
		case "name":
			if err = once(keyName); err == nil {
				m.Name, err = p.str()
			}
		case "is_error":
			if err = once(keyIsError); err == nil {
				m.IsError, err = p.boolean()
			}
		case "metadata":
			if err = once(keyMetadata); err == nil {
				m.Metadata, err = p.optionalObjectValue()
			}
		case "model":
			if err = once(keyModel); err == nil {
				m.Model, err = p.str()
			}
		case "usage":
			if err = once(keyUsage); err == nil {
				m.Usage, err = p.optionalObjectValue()
			}
		default:
			err = errSlow
		}
		return err
	})
	if err != nil {
		return err
	}
	return p.end()
}

// content reads a message's content: a string, a list of blocks or null.
func (p *parser) content(m *Message) error {
	switch p.peek() {
	case '"':
		var err error
		m.Text, err = p.str()
		return err
	case 'n':
		return p.literal("null")
	case '[':
		m.Blocks = []Block{}
		return p.array(func() error {
			var b Block
			seen := map[string]bool{}
			err := p.object(func(key []byte) error {
				k := string(key)
				if seen[k] {
					return errSlow
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
					return errSlow
				}
				var err error
				*dst, err = p.str()
				return err
			})
			m.Blocks = append(m.Blocks, b)
			return err
		})
	}
	return errSlow
}

// toolCalls reads a message's tool calls (a list, not null).
func (p *parser) toolCalls(m *Message) error {
	if p.peek() != '[' {
		return errSlow
	}
	m.ToolCalls = nil
	return p.array(func() error {
		call := ToolCall{}
		seen := 0
		err := p.object(func(key []byte) error {
			var bit int
			var err error
			switch string(key) {
			case "id":
				bit = 1
				call.ID, err = p.str()
			case "name":
				bit = 2
				call.Name, err = p.str()
			case "arguments":
				bit = 4
				call.Arguments, err = p.optionalObjectValue()
			default:
				return errSlow
			}
			if seen&bit != 0 {
				return errSlow
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
