package compact

import (
	"strconv"
	"strings"
)

// Microcompact shortens one long tool output to at most maxChars bytes. A
// text of at most maxChars bytes is returned unchanged.
//
// Otherwise it keeps the head and the tail of the text and, from the part
// in between, the diagnostic lines: lines containing "error:" or
// "warning:" (any case), "Error", "ERROR", "FAIL", "panic" (any case),
// "Traceback", "exception" (any case), a file:line position such as
// "main.go:12:" or "src/app.py:7" (a name with an extension, a colon and a
// digit), or a Python `File "x.py", line 3`. Each omitted stretch is
// replaced by a line "[... N lines, C chars omitted ...]", where C counts
// the omitted bytes and N the lines they touch. Head and tail are whole
// lines unless a single line is longer than their share, which is then cut
// (never inside a UTF-8 sequence).
//
// The result never exceeds maxChars: after reserving room for two markers
// (each at its largest possible size, with the whole text's line and byte
// counts), a quarter of the budget goes to the head, a quarter to the tail
// and half to diagnostic lines, taken in order while they fit; every
// further marker is paid from the diagnostics' half before its line is
// taken, and what the diagnostics leave unused goes to the head and the
// tail. A last check
// falls back to a plain cut. When maxChars is too small to hold two
// markers, the result is the first maxChars bytes.
func Microcompact(text string, maxChars int) string {
	if len(text) <= maxChars {
		return text
	}
	if maxChars <= 0 {
		return ""
	}
	mlen := len(omitted(lineCount(text), len(text))) + 1 // with its newline
	reserve := 2*mlen + 1                                // two markers, a newline after a cut head line
	if maxChars < reserve+2 {
		return text[:cutPrefix(text, maxChars)]
	}
	avail := maxChars - reserve
	headBudget, tailBudget := avail/4, avail/4
	diagBudget := avail - headBudget - tailBudget
	h := headEnd(text, headBudget)
	t := tailStart(text, tailBudget)

	// Diagnostic lines: whole lines inside text[h:t].
	var diags []span
	used := 0
	start := h
	if h > 0 && text[h-1] != '\n' {
		start = t
		if i := strings.IndexByte(text[h:t], '\n'); i >= 0 {
			start = h + i + 1
		}
	}
	for start < t && diagBudget-used > mlen {
		i := strings.IndexByte(text[start:t], '\n')
		if i < 0 {
			break // a partial line before a cut tail
		}
		end := start + i + 1
		if isDiagnostic(text[start : end-1]) {
			cost := end - start
			adjacent := len(diags) > 0 && diags[len(diags)-1].end == start
			if !adjacent {
				cost += mlen
			}
			if used+cost <= diagBudget {
				used += cost
				if adjacent {
					diags[len(diags)-1].end = end
				} else {
					diags = append(diags, span{start, end})
				}
			}
		}
		start = end
	}

	// Give what the diagnostics left to the head and the tail.
	left := diagBudget - used
	headLimit, tailLimit := t, h
	if len(diags) > 0 {
		headLimit, tailLimit = diags[0].start, diags[len(diags)-1].end
	}
	if nh := headEnd(text, headBudget+left/2); nh > h {
		h = min(nh, headLimit)
	}
	if nt := tailStart(text, tailBudget+left-left/2); nt < t {
		t = max(nt, tailLimit, h)
	}

	segs := make([]span, 0, len(diags)+2)
	segs = append(segs, span{0, h})
	segs = append(segs, diags...)
	segs = append(segs, span{t, len(text)})
	out := assemble(text, segs, maxChars)
	if len(out) > maxChars {
		return text[:cutPrefix(text, maxChars)]
	}
	return out
}

// span is a byte range of a text.
type span struct{ start, end int }

// assemble writes the kept spans of text in order, with a marker line for
// each gap between them. A gap no longer than its marker line is written
// as it is. After a cut line, the gap's leading newline is kept (or, when it
// has none, a newline is added) so the marker starts a line.
func assemble(text string, segs []span, size int) string {
	var b strings.Builder
	b.Grow(size)
	prev := 0
	for i, s := range segs {
		if i > 0 && s.start > prev {
			gap := text[prev:s.start]
			marker := omitted(lineCount(gap), len(gap))
			switch {
			case len(gap) <= len(marker)+1:
				b.WriteString(gap)
				gap = ""
			case b.Len() > 0 && text[prev-1] != '\n':
				b.WriteByte('\n')
				if gap[0] == '\n' {
					gap = gap[1:]
					marker = omitted(lineCount(gap), len(gap))
				}
			}
			if gap != "" {
				b.WriteString(marker)
				b.WriteByte('\n')
			}
		}
		b.WriteString(text[s.start:s.end])
		prev = s.end
	}
	return b.String()
}

// omitted returns the marker line for n lines of c bytes.
func omitted(n, c int) string {
	return "[... " + strconv.Itoa(n) + " lines, " + strconv.Itoa(c) + " chars omitted ...]"
}

// headEnd returns the end of the longest run of whole lines at the start
// of text that fits in budget bytes, or a cut of the first line at budget
// when not even one line fits.
func headEnd(text string, budget int) int {
	if budget >= len(text) {
		return len(text)
	}
	if i := strings.LastIndexByte(text[:budget], '\n'); i >= 0 {
		return i + 1
	}
	return cutPrefix(text, budget)
}

// tailStart returns the start of the longest run of whole lines at the end
// of text that fits in budget bytes, or a cut of the last line when not
// even one line fits.
func tailStart(text string, budget int) int {
	s := len(text) - budget
	if s <= 0 {
		return 0
	}
	if text[s-1] == '\n' {
		return s
	}
	if i := strings.IndexByte(text[s:], '\n'); i >= 0 && s+i+1 < len(text) {
		return s + i + 1
	}
	return cutSuffix(text, s)
}

// isDiagnostic reports whether a line is worth keeping (see Microcompact).
func isDiagnostic(line string) bool {
	return strings.Contains(line, "Error") || strings.Contains(line, "ERROR") ||
		strings.Contains(line, "FAIL") || strings.Contains(line, "Traceback") ||
		containsFold(line, "error:") || containsFold(line, "warning:") ||
		containsFold(line, "panic") || containsFold(line, "exception") ||
		strings.Contains(line, `", line `) || hasFileLine(line)
}

// containsFold reports whether s contains sub (lowercase ASCII) in any
// ASCII case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// hasFileLine reports whether line holds NAME.EXT:DIGIT, NAME made of
// path characters.
func hasFileLine(line string) bool {
	for i := 1; i+1 < len(line); i++ {
		if line[i] != ':' || !isDigit(line[i+1]) {
			continue
		}
		j := i
		for j > 0 && isPathChar(line[j-1]) {
			j--
		}
		tok := line[j:i]
		if dot := strings.LastIndexByte(tok, '.'); dot > 0 && dot < len(tok)-1 && isLetter(tok[dot+1]) {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isPathChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == '\\'
}
