package compact

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "build step %02d done\n", i)
	}
	return b.String()
}

func TestMicrocompactGolden(t *testing.T) {
	text := numbered(0, 10) +
		"main.go:12:3: undefined: parseArgs\n" +
		numbered(10, 20) +
		"--- FAIL: TestParse (0.00s)\n" +
		numbered(20, 40)
	got := Microcompact(text, 400)
	want := numbered(0, 4) +
		"[... 6 lines, 114 chars omitted ...]\n" +
		"main.go:12:3: undefined: parseArgs\n" +
		"[... 10 lines, 190 chars omitted ...]\n" +
		"--- FAIL: TestParse (0.00s)\n" +
		"[... 16 lines, 304 chars omitted ...]\n" +
		numbered(36, 40)
	if got != want {
		t.Errorf("Microcompact:\n%s\nwant:\n%s", got, want)
	}
	if len(got) > 400 {
		t.Errorf("%d bytes, over the max", len(got))
	}
}

func TestMicrocompact(t *testing.T) {
	long := numbered(0, 100)
	for _, tt := range []struct {
		name     string
		text     string
		max      int
		contains []string
		prefix   string
		suffix   string
	}{
		{"short text unchanged", "a\nb\n", 100, nil, "a\nb\n", "a\nb\n"},
		{"exactly max unchanged", long, len(long), nil, long, long},
		{"head and tail without diagnostics", long, 500, []string{"chars omitted ...]\n"},
			"build step 00 done\n", "build step 99 done\n"},
		{"diagnostics kept", numbered(0, 50) + "Traceback (most recent call last):\n" +
			`  File "app.py", line 3, in <module>` + "\n" + numbered(50, 60) + "ValueError: bad input\n" +
			numbered(60, 70) + "warning: unused variable\n" + numbered(70, 100),
			700, []string{"Traceback (most recent call last):\n" + `  File "app.py", line 3, in <module>` + "\n[...",
				"\nValueError: bad input\n", "\nwarning: unused variable\n"}, "build step 00", "build step 99 done\n"},
		{"panic and error:", numbered(0, 50) + "panic: runtime error: index out of range\n" + numbered(50, 100) +
			"ERROR something broke\n" + numbered(100, 150), 600,
			[]string{"\npanic: runtime error: index out of range\n", "\nERROR something broke\n"}, "build step 00", "build step 149 done\n"},
		{"one long line", strings.Repeat("x", 1000), 200, []string{"[... 1 lines, "}, "xxx", "xxx"},
		{"tiny max is a plain cut", long, 10, nil, "build step", "build step"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Microcompact(tt.text, tt.max)
			if len(got) > tt.max {
				t.Errorf("%d bytes, over the max %d", len(got), tt.max)
			}
			for _, s := range tt.contains {
				if !strings.Contains(got, s) {
					t.Errorf("missing %q in:\n%s", s, got)
				}
			}
			if !strings.HasPrefix(got, tt.prefix) || !strings.HasSuffix(got, tt.suffix) {
				t.Errorf("head or tail lost:\n%s", got)
			}
			checkMarkers(t, tt.text, got)
		})
	}
}

func TestMicrocompactUnchangedBelowMax(t *testing.T) {
	if got := Microcompact("", 0); got != "" {
		t.Errorf("empty: %q", got)
	}
	if got := Microcompact("abc", 0); got != "" {
		t.Errorf("max 0: %q", got)
	}
}

var markerRE = regexp.MustCompile(`\[\.\.\. (\d+) lines, (\d+) chars omitted \.\.\.\]\n`)

// checkMarkers checks that got is text with stretches replaced by markers
// whose counts are right (or a plain cut of text), and that it is valid
// UTF-8 when text is.
func checkMarkers(t *testing.T, text, got string) {
	t.Helper()
	if utf8.ValidString(text) && !utf8.ValidString(got) {
		t.Errorf("result is not valid UTF-8")
	}
	locs := markerRE.FindAllStringSubmatchIndex(got, -1)
	if len(locs) == 0 {
		if !strings.HasPrefix(text, got) {
			t.Errorf("a result without markers must be a prefix of the text")
		}
		return
	}
	pos := 0
	for i, loc := range locs {
		lines, _ := strconv.Atoi(got[loc[2]:loc[3]])
		chars, _ := strconv.Atoi(got[loc[4]:loc[5]])
		kept := got[pos:loc[0]]
		if !strings.HasPrefix(text, kept) {
			// A newline is added after a cut head line that the text does
			// not continue with a newline.
			trimmed, ok := strings.CutSuffix(kept, "\n")
			if i > 0 || !ok || !strings.HasPrefix(text, trimmed) || strings.HasPrefix(text[len(trimmed):], "\n") {
				t.Fatalf("kept part %q does not continue the text at %q", kept, text[:min(len(text), 60)])
			}
			kept = trimmed
		}
		text = text[len(kept):]
		if chars > len(text) || lineCount(text[:chars]) != lines {
			t.Fatalf("marker says %d lines, %d chars; what follows in the text is %q", lines, chars, text[:min(chars, len(text))])
		}
		if chars <= len(got[loc[0]:loc[1]]) {
			t.Errorf("a marker replaces only %d chars", chars)
		}
		text = text[chars:]
		pos = loc[1]
	}
	if got[pos:] != text {
		t.Errorf("tail %q, want the rest of the text %q", got[pos:], text)
	}
}

func TestMicrocompactRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	words := []string{"ok", "build", "error: x", "FAIL", "main.go:3:", "é", "日本語", "\t", "Exception", "panic", "   "}
	for range 2000 {
		var b strings.Builder
		lines := rng.Intn(60)
		for range lines {
			for range rng.Intn(12) {
				b.WriteString(words[rng.Intn(len(words))])
				b.WriteByte(' ')
			}
			if rng.Intn(20) == 0 {
				b.WriteString(strings.Repeat("y", rng.Intn(400)))
			}
			if rng.Intn(10) != 0 {
				b.WriteByte('\n')
			}
		}
		text := b.String()
		max := rng.Intn(len(text) + 2)
		got := Microcompact(text, max)
		if len(got) > max && len(text) > max {
			t.Fatalf("Microcompact(%q, %d) has %d bytes", text, max, len(got))
		}
		if len(text) <= max && got != text {
			t.Fatalf("a text within max changed")
		}
		checkMarkers(t, text, got)
	}
}
