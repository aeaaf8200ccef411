package compact

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/skein-dev/skein/sessions/message"
)

// argMaxChars caps the rendering of one tool-call argument value.
const argMaxChars = 200

// appendLabel appends the label that starts a message's entry in every
// rendering: "[system]", "[user]", "[assistant]", "[tool NAME]" ("[tool]"
// without a name; "[tool NAME error]" for a failed call), or "[summary]" for
// an earlier summary message.
func appendLabel(buf []byte, m *message.Message, isSummary bool) []byte {
	if isSummary {
		return append(buf, "[summary]"...)
	}
	buf = append(buf, '[')
	buf = append(buf, m.Role...)
	if m.Role == message.RoleTool {
		if m.Name != "" {
			buf = append(buf, ' ')
			buf = append(buf, m.Name...)
		}
		if m.IsError {
			buf = append(buf, " error"...)
		}
	}
	return append(buf, ']')
}

// messageText returns the message's content as one text: the string
// content, or the text blocks joined by newlines with each image block as
// "[image MEDIA_TYPE]". Thinking blocks are left out.
func messageText(m *message.Message) string {
	if m.Blocks == nil {
		return m.Text
	}
	var b strings.Builder
	for i, bl := range m.Blocks {
		if i > 0 && b.Len() > 0 && bl.Type != message.BlockThinking {
			b.WriteByte('\n')
		}
		switch bl.Type {
		case message.BlockText:
			b.WriteString(bl.Text)
		case message.BlockImage:
			b.WriteString("[image " + bl.MediaType + "]")
		}
	}
	return b.String()
}

// appendBody appends the message's text followed, for an assistant message
// that calls tools, by "called NAME(ARGS), NAME(ARGS)" (separated from the
// text by a space).
func appendBody(buf []byte, m *message.Message) []byte {
	buf = append(buf, messageText(m)...)
	return appendCalls(buf, m)
}

// appendCalls appends the " called ..." part of appendBody.
func appendCalls(buf []byte, m *message.Message) []byte {
	if !m.HasToolCalls() {
		return buf
	}
	if len(buf) > 0 && buf[len(buf)-1] != ' ' && buf[len(buf)-1] != '\n' {
		buf = append(buf, ' ')
	}
	buf = append(buf, "called "...)
	for i := range m.ToolCalls {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = appendCall(buf, &m.ToolCalls[i])
	}
	return buf
}

// appendCall appends NAME(k=v, ...) with the arguments in sorted key
// order, each value as compact JSON cut to argMaxChars ("..." marks a cut).
func appendCall(buf []byte, c *message.ToolCall) []byte {
	buf = append(buf, c.Name...)
	buf = append(buf, '(')
	var arr [8]string
	keys := arr[:0]
	for k := range c.Arguments {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = append(buf, k...)
		buf = append(buf, '=')
		start := len(buf)
		buf = appendJSON(buf, c.Arguments[k], start+argMaxChars)
		if len(buf)-start > argMaxChars {
			buf = append(buf[:cutPrefix(buf[start:], argMaxChars)+start], "..."...)
		}
	}
	return append(buf, ')')
}

// appendJSON appends v as compact JSON (object keys sorted). It stops early
// once buf is longer than stop, so huge values cost little; the caller cuts
// the result.
func appendJSON(buf []byte, v any, stop int) []byte {
	if len(buf) > stop {
		return buf
	}
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, v)
	case int64:
		return strconv.AppendInt(buf, v, 10)
	case int:
		return strconv.AppendInt(buf, int64(v), 10)
	case float64:
		return strconv.AppendFloat(buf, v, 'g', -1, 64)
	case string:
		return appendJSONString(buf, v, stop)
	case []any:
		buf = append(buf, '[')
		for i, x := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf = appendJSON(buf, x, stop); len(buf) > stop {
				return buf
			}
		}
		return append(buf, ']')
	case map[string]any:
		buf = append(buf, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k, stop)
			buf = append(buf, ':')
			if buf = appendJSON(buf, v[k], stop); len(buf) > stop {
				return buf
			}
		}
		return append(buf, '}')
	default:
		return fmt.Appendf(buf, "%v", v)
	}
}

// appendJSONString appends s as a JSON string, stopping once buf is longer
// than stop.
func appendJSONString(buf []byte, s string, stop int) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if len(buf) > stop {
			return buf
		}
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c == '\n':
			buf = append(buf, '\\', 'n')
		case c == '\r':
			buf = append(buf, '\\', 'r')
		case c == '\t':
			buf = append(buf, '\\', 't')
		case c < 0x20:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '"')
}

// cutPrefix returns the largest n <= max such that s[:n] does not end in
// the middle of a UTF-8 sequence.
func cutPrefix[S ~string | ~[]byte](s S, max int) int {
	if max >= len(s) {
		return len(s)
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// cutSuffix returns the smallest n >= start such that s[n:] starts at a
// UTF-8 sequence boundary.
func cutSuffix(s string, start int) int {
	n := max(start, 0)
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return n
}
