package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAutoIndent(t *testing.T) {
	for _, tc := range []struct{ prev, want string }{
		{"def f(n):", "    "},
		{"    if n < 0:", "        "},
		{"        return 0", "    "},
		{"    return n * 2", ""},
		{"    x = 1", "    "},
		{"    pass", ""},
		{"        break", "    "},
		{"for x in y:  # loop", "    "},
		{"s = 'a:'", ""},
		{"s = 'a # b:'", ""},
		{`s = "it's:"  # c`, ""},
		{"x = [", "    "},
		{"    f(a,", "    "},
		{"\tif x:", "\t    "},
		{"", ""},
		{"    # just a comment", "    "},
		{"return", ""},
		{"    returned = 1", "    "},
	} {
		if got := autoIndent([]string{tc.prev}); got != tc.want {
			t.Errorf("autoIndent(%q) = %q, want %q", tc.prev, got, tc.want)
		}
	}
}

// TestHistoryFile: a multi-line input is one entry, kept in the file with
// "\r\n" between its lines; a file of plain lines (older skeins) reads as
// one-line entries; blank and repeated inputs are not added; a file over
// twice the limit is cut to the newest entries.
func TestHistoryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history")
	if err := os.WriteFile(path, []byte("x = 1\n\nprint(x)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := openHistory(path)
	for _, in := range []string{"def f():\n    return 1", "def f():\n    return 1", "  ", ":help"} {
		h.add(in)
	}
	want := []string{"x = 1", "print(x)", "def f():\n    return 1", ":help"}
	if !slices.Equal(h.entries, want) {
		t.Fatalf("entries %q, want %q", h.entries, want)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "x = 1\n\nprint(x)\ndef f():\r\n    return 1\n:help\n" {
		t.Fatalf("file %q", data)
	}
	if again := openHistory(path); !slices.Equal(again.entries, want) {
		t.Fatalf("read back %q, want %q", again.entries, want)
	}

	var b strings.Builder
	for i := range 2*historyLimit + 5 {
		fmt.Fprintf(&b, "x = %d\r\nx\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h = openHistory(path)
	if len(h.entries) != historyLimit || h.entries[0] != fmt.Sprintf("x = %d\nx", historyLimit+5) {
		t.Fatalf("%d entries from %q, want %d from the newest", len(h.entries), h.entries[0], historyLimit)
	}
	if again := openHistory(path); !slices.Equal(again.entries, h.entries) {
		t.Fatal("the cut file does not read back the same")
	}
}

// TestAutoIndentInStrings: inside a string that spans lines (a Google
// style docstring) a line ending in ':' does not indent deeper, and after
// the line that closes it the next statement starts where the string's
// statement did.
func TestAutoIndentInStrings(t *testing.T) {
	doc := []string{"def area(w, h):", `    """The area of a rectangle.`, "    ", "    Args:", "        w: the width", "        h: the height", `    """`}
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{doc[:2], "    "},
		{doc[:3], "    "},
		{doc[:4], "    "},
		{doc[:5], "        "},
		{doc[:6], "        "},
		{doc, "    "},
		{[]string{"def f():", `    s = """a:`, `    b""" + ":"`}, "    "},
		{[]string{"def f():", `    return """a`, `b"""`}, ""},
		{[]string{"if x:", `    s = '''it's:`, `    done:'''`}, "    "},
		{[]string{"def f():", `    """One line."""`}, "    "},
		{[]string{"def f():", `    x = "\""`}, "    "},
		{[]string{"if x:", `    y = """a`, `    """`, "    if y:"}, "        "},
	} {
		if got := autoIndent(tc.lines); got != tc.want {
			t.Errorf("autoIndent(%q) = %q, want %q", tc.lines, got, tc.want)
		}
	}
}
