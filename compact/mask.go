package compact

import (
	"strconv"
	"strings"

	"github.com/skein-dev/skein/sessions/message"
)

// Limits of the observation_mask strategy. A text is long when it has more
// than maskMaxLines lines or more than maskMaxChars bytes.
const (
	maskMaxChars     = 200
	maskMaxLines     = 3
	maskPreviewChars = 200 // the shown first line is cut to this
)

// maskSummary appends the observation_mask strategy's summary body to buf:
// one entry per archived message, separated by newlines.
//
//   - An earlier summary message contributes its body verbatim (it is
//     already compacted), with no label; an empty body contributes nothing.
//   - An assistant message: "[assistant] TEXT called NAME(ARGS), ..." with
//     its text in full (see appendBody).
//   - Any other message: "LABEL TEXT" when TEXT is not long; otherwise
//     "LABEL FIRST [L lines, C chars masked]", where FIRST is its first
//     non-blank line (cut to maskPreviewChars, "..." marking a cut) and L
//     and C count the lines and bytes of the whole text.
//   - An override (a non-nil entry of overrides) replaces TEXT of that
//     message: "LABEL OVERRIDE", for any role.
//
// A message with nothing to show renders as its label alone.
func maskSummary(buf []byte, archived []message.Message, overrides []*string) []byte {
	start := len(buf)
	sep := func() {
		if len(buf) > start {
			buf = append(buf, '\n')
		}
	}
	for i := range archived {
		m := &archived[i]
		var override *string
		if overrides != nil {
			override = overrides[i]
		}
		info, isSummary := ParseSummary(m)
		if isSummary && override == nil {
			if info.Body != "" {
				sep()
				buf = append(buf, info.Body...)
			}
			continue
		}
		sep()
		buf = appendLabel(buf, m, isSummary)
		mark := len(buf)
		buf = append(buf, ' ')
		switch {
		case override != nil:
			buf = append(buf, *override...)
		case m.Role == message.RoleAssistant:
			buf = appendBody(buf, m)
		default:
			buf = appendMasked(buf, messageText(m))
		}
		if len(buf) == mark+1 {
			buf = buf[:mark]
		}
	}
	return buf
}

// maskSize estimates the size of maskSummary's output, to size its buffer.
func maskSize(archived []message.Message) int {
	n := 0
	for i := range archived {
		m := &archived[i]
		n += 24 + len(m.Name)
		switch {
		case m.Role == message.RoleAssistant:
			n += len(m.Text) + 96*len(m.ToolCalls)
		case len(m.Text) <= maskMaxChars:
			n += len(m.Text)
		default:
			n += maskPreviewChars/2 + 32
		}
	}
	return n
}

// appendMasked appends text unchanged when it is not long, else its first
// non-blank line and the "[L lines, C chars masked]" marker.
func appendMasked(buf []byte, text string) []byte {
	lines := lineCount(text)
	if len(text) <= maskMaxChars && lines <= maskMaxLines {
		return append(buf, text...)
	}
	first := firstLine(text)
	if len(first) > maskPreviewChars {
		buf = append(buf, first[:cutPrefix(first, maskPreviewChars)]...)
		buf = append(buf, "..."...)
	} else {
		buf = append(buf, first...)
	}
	if len(first) > 0 {
		buf = append(buf, ' ')
	}
	buf = append(buf, '[')
	buf = strconv.AppendInt(buf, int64(lines), 10)
	buf = append(buf, " lines, "...)
	buf = strconv.AppendInt(buf, int64(len(text)), 10)
	return append(buf, " chars masked]"...)
}

// lineCount returns the number of lines of s: its newlines, plus one for a
// last line without a newline. An empty text has 0 lines.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if len(s) > 0 && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

// firstLine returns the first line of s that is not blank, without its
// line break and surrounding whitespace ("" when every line is blank).
func firstLine(s string) string {
	for s != "" {
		line, rest, _ := strings.Cut(s, "\n")
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
		s = rest
	}
	return ""
}
