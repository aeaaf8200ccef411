package compact

import (
	"strconv"
	"strings"

	"github.com/skein-dev/skein/sessions/message"
)

const (
	headerStart = "[auto-compacted "
	headerMid   = " older messages via "
)

// header returns the first line of a summary message.
func header(n int, strategy string) string {
	return headerStart + strconv.Itoa(n) + headerMid + strategy + "]"
}

// SummaryMessage returns the user message that stands for n older messages:
// its text is the header line "[auto-compacted N older messages via
// <strategy>]", a newline, and body; it is marked as a summary in its
// metadata (message.MetaSummary).
func SummaryMessage(n int, strategy, body string) message.Message {
	return summaryMessage(header(n, strategy) + "\n" + body)
}

// summaryMessage is the user message holding a summary's text (header
// and body), marked as a summary (message.MetaSummary).
func summaryMessage(text string) message.Message {
	return message.Message{Role: message.RoleUser, Text: text, Metadata: map[string]any{message.MetaSummary: true}}
}

// SummaryInfo is what ParseSummary reads back from a summary message.
type SummaryInfo struct {
	Count    int    // the N of the header: how many older messages it stands for
	Strategy string // the strategy named in the header
	Body     string // the text after the header line
}

// ParseSummary reports whether m is a summary message (a user message with
// string content whose first line is a well-formed header, as
// SummaryMessage writes it) and returns its parts.
func ParseSummary(m *message.Message) (SummaryInfo, bool) {
	if m.Role != message.RoleUser || m.Blocks != nil || !strings.HasPrefix(m.Text, headerStart) {
		return SummaryInfo{}, false
	}
	first, body, _ := strings.Cut(m.Text[len(headerStart):], "\n")
	num, rest, ok := strings.Cut(first, headerMid)
	if !ok || !strings.HasSuffix(rest, "]") {
		return SummaryInfo{}, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || num != strconv.Itoa(n) {
		return SummaryInfo{}, false
	}
	strategy := rest[:len(rest)-1]
	if strategy == "" || strings.TrimLeft(strategy, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return SummaryInfo{}, false
	}
	return SummaryInfo{Count: n, Strategy: strategy, Body: body}, true
}

// standsFor returns how many original messages msgs stand for: one each,
// except a summary message, which counts as the N of its header.
func standsFor(msgs []message.Message) int {
	n := 0
	for i := range msgs {
		if s, ok := ParseSummary(&msgs[i]); ok {
			n += s.Count
		} else {
			n++
		}
	}
	return n
}
