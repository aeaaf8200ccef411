// Package wordcount counts words and lines of text.
package wordcount

import "strings"

// Count returns the number of words in s: runs of characters between
// spaces, tabs and newlines.
func Count(s string) int {
	return len(strings.Fields(s))
}

// Lines returns the number of lines in s; a last line without a newline
// counts too.
func Lines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
