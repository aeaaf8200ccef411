package compact

import (
	"strconv"

	"github.com/skein-dev/skein/sessions/message"
)

// Limits of the truncate strategy.
const (
	truncateMaxEntries = 15  // entries shown; the rest is counted
	truncateMaxChars   = 500 // per entry, after its label
)

// truncateSummary appends the truncate strategy's summary body to buf: one line
// per archived message, "LABEL TEXT", for the first truncateMaxEntries
// messages, then "... and N more" when there were more. TEXT is the
// message's body (see appendBody; an earlier summary message contributes
// its body under the label "[summary]") with every run of whitespace
// turned into one space; when longer than truncateMaxChars it is cut there
// and ends with "...".
func truncateSummary(buf []byte, archived []message.Message) []byte {
	var body []byte
	for i := range archived[:min(len(archived), truncateMaxEntries)] {
		if i > 0 {
			buf = append(buf, '\n')
		}
		m := &archived[i]
		info, isSummary := ParseSummary(m)
		buf = appendLabel(buf, m, isSummary)
		if isSummary {
			body = append(body[:0], info.Body...)
		} else {
			body = appendBody(body[:0], m)
		}
		buf = appendFlat(buf, body, truncateMaxChars)
	}
	if more := len(archived) - truncateMaxEntries; more > 0 {
		buf = append(buf, "\n... and "...)
		buf = strconv.AppendInt(buf, int64(more), 10)
		buf = append(buf, " more"...)
	}
	return buf
}

// appendFlat appends a space and s with every run of ASCII whitespace
// turned into one space and the ends trimmed (nothing when s is blank).
// When that text is longer than limit bytes, it is cut to at most limit
// (never inside a UTF-8 sequence), trailing spaces dropped, and "..."
// appended.
func appendFlat(buf, s []byte, limit int) []byte {
	start := -1
	space := false
	for _, c := range s {
		if isSpace(c) {
			space = true
			continue
		}
		if start < 0 {
			buf = append(buf, ' ')
			start = len(buf)
		} else if space {
			buf = append(buf, ' ')
		}
		space = false
		buf = append(buf, c)
		if len(buf)-start > limit {
			buf = buf[:start+cutPrefix(buf[start:], limit)]
			for len(buf) > start && buf[len(buf)-1] == ' ' {
				buf = buf[:len(buf)-1]
			}
			return append(buf, "..."...)
		}
	}
	return buf
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}
