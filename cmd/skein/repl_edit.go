package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/chzyer/readline"
)

// Line editing of the interactive REPL, as users of Python's REPL and
// IPython expect: continuation lines start indented, and the history
// holds whole inputs (a multi-line def is one entry, recalled and run
// again as one).

// lineSource gives the REPL loop its lines: the line editor on a
// terminal, or piped input.
type lineSource interface {
	// line returns the next line; continued is set for the lines after
	// an input's first.
	line(continued bool) (string, error)
	// done is told the source of each input once it has been read (""
	// when the read failed, as after Ctrl-C while typing).
	done(source string)
}

// pipedLines reads lines from piped input.
type pipedLines struct{ in *bufio.Reader }

func (p pipedLines) line(bool) (string, error) {
	line, err := p.in.ReadString('\n')
	if errors.Is(err, io.EOF) && line != "" {
		err = nil
	}
	return line, err
}

func (pipedLines) done(string) {}

// blockSep stands for a newline inside a recalled multi-line input in the
// line editor's buffer, which holds one line (a private-use character no
// one types; blockPainter shows it as ↵).
const blockSep = '\ue000'

// editorLines reads lines from the line editor.
type editorLines struct {
	rl      *readline.Instance
	in      *lineReader // the editor's input
	history *replHistory
	lines   []string // the lines of the input so far
	queue   []string // the rest of a recalled multi-line input
}

func (e *editorLines) line(continued bool) (string, error) {
	if len(e.queue) > 0 {
		line := e.queue[0]
		e.lines, e.queue = append(e.lines, line), e.queue[1:]
		return line, nil
	}
	prompt, indent := primaryPrompt, ""
	if continued {
		prompt = continuationPrompt
		if !e.in.pending() { // pasted lines bring their own indentation
			indent = autoIndent(e.lines)
		}
	}
	e.rl.SetPrompt(prompt)
	line, err := e.rl.ReadlineWithDefault(indent)
	if err != nil {
		return "", err
	}
	if lines := strings.Split(line, string(blockSep)); len(lines) > 1 {
		// a recalled block: its lines, then the blank line that ends it
		line, e.queue = lines[0], append(lines[1:], "")
	}
	if !continued {
		e.lines = e.lines[:0]
	}
	e.lines = append(e.lines, line)
	return line, nil
}

func (e *editorLines) done(source string) {
	e.queue, e.lines = nil, nil
	if e.history.add(source) {
		e.history.load(e.rl)
	}
}

// lineReader is the line editor's input: it hands the terminal's input
// over a line at a time (up to a '\r' or '\n') and keeps the rest, so
// the REPL can tell that more is already waiting, as when code is pasted.
type lineReader struct {
	r io.Reader

	mu  sync.Mutex
	buf []byte
}

func (l *lineReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		l.mu.Unlock()
		chunk := make([]byte, 4096)
		n, err := l.r.Read(chunk) // blocks: not under the lock
		l.mu.Lock()
		if n == 0 {
			return 0, err
		}
		l.buf = append(l.buf, chunk[:n]...)
	}
	end := len(l.buf)
	if i := bytes.IndexAny(l.buf, "\r\n"); i >= 0 {
		end = i + 1
	}
	n := copy(p, l.buf[:end])
	l.buf = l.buf[n:]
	return n, nil
}

// pending reports whether input has been read that the editor has not
// taken yet.
func (l *lineReader) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf) > 0
}

// autoIndent is the indentation to start the line after lines (the
// input's lines so far) with, in a block: inside a string that spans
// lines (a docstring), the last line's, whatever it ends with; otherwise
// that of the line the last statement began on (a statement whose string
// spanned lines ends on the line that closes it), one level (four
// spaces) deeper after a line ending in ':' or an opening bracket, one
// level shallower after return, pass, break or continue.
func autoIndent(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	var (
		open  string // the quotes of a string still open at the end of a line
		start int    // the line the last statement began on
		code  string // the last line's code outside strings and comments
	)
	for i, l := range lines {
		if open == "" {
			start = i
		}
		code, open = scanCode(strings.TrimRight(l, "\r\n"), open)
	}
	if open != "" {
		return indentOf(lines[len(lines)-1])
	}
	indent := indentOf(lines[start])
	code = strings.TrimSpace(code)
	if code != "" && strings.ContainsRune(":([{", rune(code[len(code)-1])) {
		return indent + "    "
	}
	first, _ := scanCode(strings.TrimRight(lines[start], "\r\n"), "")
	word, _, _ := strings.Cut(strings.TrimSpace(first), " ")
	switch word {
	case "return", "pass", "break", "continue":
		return indent[:max(0, len(indent)-4)]
	}
	return indent
}

// indentOf returns the leading spaces and tabs of line.
func indentOf(line string) string {
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}

// scanCode returns a line's code with each string literal's contents
// left out (a string is written "") and without its '#' comment, and the
// quotes (three double or three single) of a string still open at its
// end. open is the quotes of a string the line starts inside ("" when it
// starts in code).
func scanCode(line, open string) (code string, stillOpen string) {
	var b strings.Builder
	quote := open
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != "" && c == '\\':
			i++
		case quote != "" && strings.HasPrefix(line[i:], quote):
			i += len(quote) - 1
			quote = ""
			b.WriteString(`""`)
		case quote != "":
		case c == '#':
			return b.String(), ""
		case c == '\'' || c == '"':
			quote = string(c)
			if q := strings.Repeat(string(c), 3); strings.HasPrefix(line[i:], q) {
				quote, i = q, i+2
			}
		default:
			b.WriteByte(c)
		}
	}
	if len(quote) == 3 {
		return b.String() + `""`, quote
	}
	return b.String(), ""
}

// blockPainter shows blockSep as ↵: a recalled multi-line input reads
// "def f():↵    return 1" on the edited line.
type blockPainter struct{}

func (blockPainter) Paint(line []rune, _ int) []rune {
	if !slices.Contains(line, blockSep) {
		return line
	}
	out := slices.Clone(line)
	for i, r := range out {
		if r == blockSep {
			out[i] = '↵'
		}
	}
	return out
}

// historyLimit is how many inputs the history keeps.
const historyLimit = 1000

// replHistory is the REPL's history of inputs, one entry per input, kept
// in a file: an entry per line, a multi-line entry's lines joined by
// "\r\n" (the format of Python 3.13's REPL, and a file of plain lines,
// as older skeins wrote, reads as one-line entries).
type replHistory struct {
	path    string // "": none is kept
	entries []string
}

// openHistory reads the history file at path (missing: empty). A file
// longer than twice the limit is rewritten with the newest entries.
func openHistory(path string) *replHistory {
	h := &replHistory{path: path}
	if path == "" {
		return h
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return h
	}
	var entry []string
	for _, line := range strings.Split(string(data), "\n") {
		if cont, ok := strings.CutSuffix(line, "\r"); ok {
			entry = append(entry, cont)
			continue
		}
		entry = append(entry, line)
		if e := strings.Join(entry, "\n"); strings.TrimSpace(e) != "" {
			h.entries = append(h.entries, e)
		}
		entry = nil
	}
	if len(h.entries) > 2*historyLimit {
		h.entries = h.entries[len(h.entries)-historyLimit:]
		h.rewrite()
	}
	return h
}

// add records an input as the newest entry, in memory and in the file,
// unless it is blank or the newest entry already; it reports whether it
// did.
func (h *replHistory) add(source string) bool {
	if strings.TrimSpace(source) == "" || len(h.entries) > 0 && h.entries[len(h.entries)-1] == source {
		return false
	}
	h.entries = append(h.entries, source)
	if len(h.entries) > historyLimit {
		h.entries = h.entries[len(h.entries)-historyLimit:]
	}
	if h.path != "" {
		f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			f.WriteString(fileEntry(source)) // one write: concurrent REPLs do not interleave
			f.Close()
		}
	}
	return true
}

// fileEntry is an entry as the history file holds it.
func fileEntry(source string) string {
	return strings.ReplaceAll(source, "\n", "\r\n") + "\n"
}

// rewrite writes the entries to a new file that replaces the old one.
func (h *replHistory) rewrite() {
	var b strings.Builder
	for _, e := range h.entries {
		b.WriteString(fileEntry(e))
	}
	tmp := h.path + ".tmp"
	if os.WriteFile(tmp, []byte(b.String()), 0o600) == nil {
		os.Rename(tmp, h.path)
	}
}

// load gives the line editor the entries (replacing what it had, so Up
// starts again from the newest), each on one line with blockSep for its
// newlines.
func (h *replHistory) load(rl *readline.Instance) {
	rl.ResetHistory()
	for _, e := range h.entries {
		rl.SaveHistory(strings.ReplaceAll(e, "\n", string(blockSep)))
	}
}

// historyFile is the REPL's history: skein/history in the user's config
// directory ("" when there is none: no history is kept).
func historyFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "skein")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return filepath.Join(dir, "history")
}
