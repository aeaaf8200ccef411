//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skein-dev/skein/sessions"
)

// TestTraceColour: the -v trace is coloured on a terminal, and plain when
// NO_COLOR is set (to anything but ""), when TERM is dumb, or when stderr
// is a pipe, a file or a buffer.
func TestTraceColour(t *testing.T) {
	_, term := openPTY(t)
	defer term.Close()
	r, pipe, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pipe.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "trace.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		w    any
		env  func(string) string
		want bool
	}{
		{"terminal", term, env("TERM", "xterm-256color"), true},
		{"terminal, NO_COLOR empty", term, env("NO_COLOR", ""), true},
		{"terminal, NO_COLOR=1", term, env("NO_COLOR", "1"), false},
		{"terminal, NO_COLOR=false", term, env("NO_COLOR", "false"), false},
		{"terminal, TERM=dumb", term, env("TERM", "dumb"), false},
		{"pipe", pipe, env(), false},
		{"file", file, env(), false},
		{"buffer", &bytes.Buffer{}, env(), false},
	} {
		w := tc.w.(interface{ Write([]byte) (int, error) })
		if got := colorOn(w, tc.env); got != tc.want {
			t.Errorf("%s: colorOn = %v, want %v", tc.name, got, tc.want)
		}
	}

	// the coloured line has the same text, in ANSI styles
	e := sessions.Event{Type: "tool_result", SessionID: "chat", Data: map[string]any{"name": "weather", "status": "error", "duration_ms": int64(38), "error": "no\x1b[2J"}}
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		tr := newTracer(&buf, color)
		tr.now = func() time.Time { return tr.start.Add(1500 * time.Millisecond) }
		tr.event(e)
		plain := "[1.50s] chat: tool weather error 38ms: no\\x1b[2J\n"
		got := buf.String()
		if !color && got != plain {
			t.Errorf("plain line %q, want %q", got, plain)
		}
		if color && (got == plain || strings.Count(got, "\x1b[") != 4 || stripANSI(got) != plain) {
			t.Errorf("coloured line %q: want %q in colours", got, plain)
		}
	}
}

// stripANSI drops the SGR sequences (ESC [ ... m) of s.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := strings.IndexByte(s[i:], 'm')
			if j > 0 {
				i += j
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestTraceCutsLongValues: a long value is cut after 200 characters, not
// in the middle of one.
func TestTraceCutsLongValues(t *testing.T) {
	var buf bytes.Buffer
	tr := newTracer(&buf, false)
	tr.event(sessions.Event{Type: "error", SessionID: "s", Data: map[string]any{"message": strings.Repeat("é", 300)}})
	line := buf.String()
	if !utf8.ValidString(line) || !strings.HasSuffix(line, ": error: "+strings.Repeat("é", 200)+"...\n") {
		t.Fatalf("line %q", line)
	}
}

func TestTraceToolProgress(t *testing.T) {
	var buf bytes.Buffer
	tr := newTracer(&buf, false)
	tr.event(sessions.Event{Type: "tool_progress", SessionID: "s", Data: map[string]any{"name": "build", "progress": int64(2), "total": int64(5), "message": "compiling"}})
	tr.event(sessions.Event{Type: "tool_progress", SessionID: "s", Data: map[string]any{"name": "build", "progress": 0.5}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "tool build progress 2/5: compiling") || !strings.HasSuffix(lines[1], "tool build progress 0.5") {
		t.Fatalf("lines %q", lines)
	}
}
