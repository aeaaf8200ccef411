package main

import (
	"strings"

	"github.com/skein-dev/skein/sessions"
)

// Stored ids, titles, message text, run records and error messages reach
// the terminal through these two functions, so that a value written by a
// hostile script, an imported file or an older version cannot clear the
// screen, move the cursor, draw a fake row or break a table.

// printable returns s for one line or one table cell (see
// sessions.Escape): control characters (tabs and newlines included),
// invisible characters, Unicode bidirectional controls and invalid UTF-8
// are written as Go escapes (\x1b, \n, \u200b, \u202e, \xff).
func printable(s string) string { return sessions.Escape(s) }

// printableText is printable for text shown over several lines (message
// text, a run's output): newlines and tabs are kept.
func printableText(s string) string { return sessions.EscapeText(s) }

// printableList is ids joined by ", ", each printable.
func printableList(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = printable(id)
	}
	return strings.Join(out, ", ")
}
