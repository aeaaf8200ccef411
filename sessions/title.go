package sessions

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
)

// FirstPromptLen is the most characters a derived first prompt (and a
// listing's label) has.
const FirstPromptLen = 60

// FirstPrompt returns the label a session without a title gets in
// listings: the first line of the first user message's text in v (a
// compaction's summary, message.MetaSummary, is not a prompt),
// trimmed and cut to FirstPromptLen characters (the last one an ellipsis
// when cut); "" when v has no user message with text.
func FirstPrompt(v message.View) string {
	for i := 0; i < v.Len(); i++ {
		if m := v.At(i); m.Role == message.RoleUser && !m.IsSummary() {
			if p := Label(m.TextContent()); p != "" {
				return p
			}
		}
	}
	return ""
}

// Label returns the first non-blank line of s, trimmed and cut to
// FirstPromptLen characters (the last one an ellipsis when cut): how
// titles and first prompts are shown in one line of a listing.
func Label(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) <= FirstPromptLen {
			return line
		}
		r := []rune(line)
		return string(r[:FirstPromptLen-1]) + "…"
	}
	return ""
}

// Label returns the session's title for a listing: its title's first
// line, else its first prompt (see FirstPrompt), else "".
func (s *Summary) Label() string {
	if l := Label(s.Title); l != "" {
		return l
	}
	return s.FirstPrompt
}

// MergeMetadata returns base with the keys of update set (replaced, not
// merged deeply), as a new object; nil when the result is empty. Neither
// argument is modified.
func MergeMetadata(base, update map[string]any) map[string]any {
	out := jsonvalue.CloneObject(base)
	if out == nil {
		out = make(map[string]any, len(update))
	}
	for k, v := range update {
		out[k] = jsonvalue.Clone(v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// CheckMetadata validates a session's metadata object: every value must
// be a JSON value (see jsonvalue.Check).
func CheckMetadata(m map[string]any) error {
	if err := jsonvalue.Check(m); err != nil {
		return fmt.Errorf("metadata: %v", err)
	}
	return nil
}

// Slug returns the kebab-case slug of a title: its ASCII letters (lower
// case) and digits; runs of other ASCII characters become one hyphen,
// none at the ends; non-ASCII characters are dropped ("ünïcode" is
// "ncode", as in the agent-session specification); "exported-session"
// when nothing is left. Exports name their files and workflows with it.
func Slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range title {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		switch {
		case 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		case r < utf8.RuneSelf:
			dash = true
		}
	}
	if b.Len() == 0 {
		return "exported-session"
	}
	return b.String()
}
