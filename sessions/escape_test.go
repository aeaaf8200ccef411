package sessions

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"plain id-1", "plain id-1", "plain id-1"},
		{"a\rb\nc\td", `a\rb\nc\td`, "a\\rb\nc\td"},
		{"\x1b[2J\x00\x7f", `\x1b[2J\x00\x7f`, `\x1b[2J\x00\x7f`},
		{"id\u200b", `id\u200b`, `id\u200b`},                      // zero-width space
		{"\ufeffid", `\ufeffid`, `\ufeffid`},                      // byte order mark
		{"a\u2028b\u2029c", `a\u2028b\u2029c`, `a\u2028b\u2029c`}, // separators
		{"a\u00a0b\u3000c", `a\u00a0b\u3000c`, "a\u00a0b\u3000c"}, // spaces: kept in text
		{"\u202eevil", `\u202eevil`, `\u202eevil`},
		{"bad\xff", `bad\xff`, `bad\xff`},
		{"real \uFFFD", "real \uFFFD", "real \uFFFD"},
		{"\U000e0041tag", `\U000e0041tag`, `\U000e0041tag`}, // a tag character (Cf)
		{"café 日本", "café 日本", "café 日本"},
	} {
		if got := Escape(c.in); got != c.line {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := EscapeText(c.in); got != c.text {
			t.Errorf("EscapeText(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}
