package sessions

import (
	"strconv"
	"strings"
	"unicode"
)

// Escape returns s for one line: control characters (tabs and newlines
// included), line and paragraph separators, invisible format characters
// (zero-width spaces and joiners, the byte order mark, Unicode
// bidirectional controls), spaces other than U+0020 (no-break spaces,
// U+3000) and invalid UTF-8 are written as Go escapes (\x1b, \n, \u202e,
// \u00a0, \xff). Stored ids, titles and messages may come from a hostile
// script or file: escaped, one cannot clear a terminal, draw a fake row,
// end a comment line in generated code or pass for another id that looks
// the same.
func Escape(s string) string { return escape(s, false) }

// EscapeText is Escape for text shown over several lines (message text, a
// run's output): newlines, tabs and spaces other than U+0020 are kept.
func EscapeText(s string) string { return escape(s, true) }

// unsafeRune reports whether r is escaped by EscapeText.
func unsafeRune(r rune) bool {
	return r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) ||
		unicode.Is(unicode.Bidi_Control, r)
}

func escape(s string, keepLines bool) string {
	bad := func(r rune) bool {
		if keepLines {
			return r != '\n' && r != '\t' && unsafeRune(r)
		}
		return unsafeRune(r) || (r != ' ' && unicode.Is(unicode.Zs, r))
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
			b.WriteString(escapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// escapeRune returns r as a Go escape: \n, \x1b, \u200b.
func escapeRune(r rune) string {
	switch r {
	case '\a', '\b', '\f', '\n', '\r', '\t', '\v':
		q := strconv.QuoteRune(r)
		return q[1 : len(q)-1]
	}
	if r < 0x80 {
		return `\x` + strconv.FormatUint(uint64(r)|0x100, 16)[1:]
	}
	if r < 0x10000 {
		return `\u` + strconv.FormatUint(uint64(r)|0x10000, 16)[1:]
	}
	return `\U` + strconv.FormatUint(uint64(r)|0x100000000, 16)[1:]
}
