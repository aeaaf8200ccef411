package main

import (
	"strconv"
	"strings"
	"unicode"
)

// Stored ids, titles, message text, run records and error messages reach
// the terminal through these two functions, so that a value written by a
// hostile script, an imported file or an older version cannot clear the
// screen, move the cursor, draw a fake row or break a table.

// printable returns s for one line or one table cell: control characters
// (tabs and newlines included), Unicode bidirectional controls and invalid
// UTF-8 are written as Go escapes (\x1b, \n, \u202e, \xff).
func printable(s string) string { return escapeControls(s, false) }

// printableText is printable for text shown over several lines (message
// text, a run's output): newlines and tabs are kept.
func printableText(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepLines bool) string {
	bad := func(r rune) bool {
		if keepLines && (r == '\n' || r == '\t') {
			return false
		}
		return r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteRune(r) // a real U+FFFD, not an invalid byte
		case r == unicode.ReplacementChar:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		case bad(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// printableList is ids joined by ", ", each printable.
func printableList(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = printable(id)
	}
	return strings.Join(out, ", ")
}
