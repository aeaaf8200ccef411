package compact

import (
	"strconv"

	"github.com/skein-dev/skein/sessions/message"
)

// Token estimation constants.
const (
	messageOverhead  = 4    // tokens per message (role, framing)
	toolCallOverhead = 4    // tokens per tool call (id, framing)
	imageTokens      = 1000 // tokens per image block
	// denseSample bounds how much of a text looksDense reads: all of a
	// text up to this size, else its first and last denseSample/2 bytes.
	denseSample = 1024
)

// EstimateText estimates the tokens of s: one per 4 bytes of prose, one
// per 2 bytes of text that looks like JSON or code (rounded up). A text
// looks like JSON or code when it starts with '{' or '[' (after spaces), or
// when at least a tenth of its bytes are code punctuation (brackets,
// quotes, '=', ';', ':', '/', '\', '|', '&', '*', '_', '#', '$', '%', '+',
// '^', '~', '@', '`', '<', '>'); texts over 1 KiB are judged by their first
// and last 512 bytes, so the cost does not grow with the text.
func EstimateText(s string) int {
	return textTokens(s, false)
}

// EstimateMessage estimates the tokens m adds to a request: a per-message
// overhead of 4, its text (EstimateText; a tool result always counts as
// dense, 2 bytes per token), thinking text as text, 1000 per image, and
// per tool call 4 plus its name and its arguments' JSON size at 2 bytes per
// token. Metadata, usage and model are not sent and do not count. It does
// not allocate, so the agent loop can keep a running total by adding the
// estimate of each message it appends.
func EstimateMessage(m *message.Message) int {
	dense := m.Role == message.RoleTool
	t := messageOverhead
	if m.Blocks == nil {
		t += textTokens(m.Text, dense)
	}
	for i := range m.Blocks {
		b := &m.Blocks[i]
		switch b.Type {
		case message.BlockText:
			t += textTokens(b.Text, dense)
		case message.BlockThinking:
			t += textTokens(b.Thinking, false)
		case message.BlockRedactedThinking:
			t += textTokens(b.Data, true)
		case message.BlockImage:
			t += imageTokens
		}
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		t += toolCallOverhead + (len(c.Name)+jsonSize(c.Arguments)+1)/2
	}
	return t
}

// EstimateTokens estimates the tokens of msgs: the sum of EstimateMessage
// over them (so estimates of parts add up).
func EstimateTokens(msgs []message.Message) int {
	t := 0
	for i := range msgs {
		t += EstimateMessage(&msgs[i])
	}
	return t
}

func textTokens(s string, dense bool) int {
	if dense || looksDense(s) {
		return (len(s) + 1) / 2
	}
	return (len(s) + 3) / 4
}

// codePunct marks the bytes looksDense counts.
var codePunct = func() (t [256]bool) {
	for _, c := range []byte("{}[]()<>=;:\"`/\\|&*_#$%+^~@") {
		t[c] = true
	}
	return t
}()

// looksDense reports whether s looks like JSON or code (see EstimateText).
func looksDense(s string) bool {
	for i := 0; i < len(s) && i < 64; i++ {
		c := s[i]
		if c == '{' || c == '[' {
			return true
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			break
		}
	}
	if len(s) <= denseSample {
		return punctCount(s)*10 >= len(s) && len(s) > 0
	}
	const half = denseSample / 2
	return (punctCount(s[:half])+punctCount(s[len(s)-half:]))*10 >= denseSample
}

func punctCount(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if codePunct[s[i]] {
			n++
		}
	}
	return n
}

// jsonSize approximates the length of v encoded as compact JSON, without
// allocating (string escapes are not counted).
func jsonSize(v any) int {
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		if v {
			return 4
		}
		return 5
	case string:
		return len(v) + 2
	case int64:
		var b [24]byte
		return len(strconv.AppendInt(b[:0], v, 10))
	case int:
		var b [24]byte
		return len(strconv.AppendInt(b[:0], int64(v), 10))
	case float64:
		var b [32]byte
		return len(strconv.AppendFloat(b[:0], v, 'g', -1, 64))
	case []any:
		n := 2 + max(len(v)-1, 0)
		for _, x := range v {
			n += jsonSize(x)
		}
		return n
	case map[string]any:
		n := 2 + max(len(v)-1, 0)
		for k, x := range v {
			n += len(k) + 3 + jsonSize(x)
		}
		return n
	}
	return 8
}
