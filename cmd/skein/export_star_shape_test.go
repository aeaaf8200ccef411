package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.starlark.net/syntax"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/export"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// starSession is a session with a title, one metadata entry, a prompt, a
// tool call with one argument, its result and a reply.
func starSession(title, key, val, prompt, reply, arg, result string) *sessions.Record {
	return &sessions.Record{ID: "fz", Title: title, Metadata: map[string]any{key: val}, Messages: []message.Message{
		{Role: message.RoleUser, Text: prompt},
		{Role: message.RoleAssistant, ToolCalls: []message.ToolCall{{ID: "c1", Name: "lookup", Arguments: map[string]any{"q": arg}}}},
		{Role: message.RoleTool, ToolCallID: "c1", Name: "lookup", Text: result},
		{Role: message.RoleAssistant, Text: reply},
	}}
}

// starShape parses a generated pipeline and returns its syntax tree as a
// sequence of node kinds, identifiers and non-string literals (string
// literals are "STR"), and its string literals' values in order.
func starShape(t *testing.T, src []byte) (shape []string, strs []string) {
	t.Helper()
	f, err := vm.Dialect().Parse("x.star", src, 0)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, src)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Ident:
			shape = append(shape, "ident "+n.Name)
		case *syntax.Literal:
			if s, ok := n.Value.(string); ok && n.Token == syntax.STRING {
				shape = append(shape, "STR")
				strs = append(strs, s)
			} else {
				shape = append(shape, fmt.Sprintf("lit %v", n.Value))
			}
		case nil:
		default:
			shape = append(shape, fmt.Sprintf("%T", n))
		}
		return true
	})
	return shape, strs
}

// FuzzExportStarShape is the in-process companion of FuzzExportStar: it
// runs no command, store or replay, so it makes thousands of executions
// a second where FuzzExportStar makes a few. For any title, metadata,
// prompt, reply, tool argument and result it exports the session as a
// pipeline and checks that
//   - the pipeline parses, with exactly the syntax tree of a session
//     with the same structure and harmless values (only string literals
//     differ): no value ends a comment or a string and adds code;
//   - the title, metadata key and value, prompt and tool result are
//     string literals of it, exactly;
//   - every fixture line is JSON whose reply and tool argument are the
//     session's.
func FuzzExportStarShape(f *testing.F) {
	f.Add("Q3\rfs.write(\"pwned.txt\",\"owned\");print(\"INJECTED\")#", "k", "v", "hi", "done", "a", "r")
	f.Add("plain", "repo", "api", "Plan a trip.", "Sunny.\n\"q\" \\ b", "Lisbon", "sunny")
	f.Add("\x00\xff\u202e", "\u2028", "\\x41", "\r\n", "''' \"\"\"", "#", "\t")
	f.Add("a\")\nprint(\"INJECTED\")\n#", "k\r", "v\rprint(1)", "\"\"\"", "x", "\\", "'")
	f.Fuzz(func(t *testing.T, title, key, val, prompt, reply, arg, result string) {
		// Stored strings are UTF-8: scripts' str(bytes), JSON bodies and
		// imports make invalid bytes U+FFFD or refuse them.
		for _, p := range []*string{&title, &key, &val, &prompt, &reply, &arg, &result} {
			*p = strings.ToValidUTF8(*p, "\uFFFD")
		}
		// the harmless twin: blank values kept (they change what the
		// exporter writes: a blank prompt is injected, not run), others
		// replaced by a word
		harmless := func(s, marker string) string {
			if strings.TrimSpace(s) == "" {
				return s
			}
			return marker
		}
		hk, hv := harmless(key, "k"), harmless(val, "v")
		h, err := export.ExportStar(starSession(title, key, val, prompt, reply, arg, result), "x")
		if err != nil {
			return // refused
		}
		b, err := export.ExportStar(starSession(harmless(title, "t"), hk, hv, harmless(prompt, "p"), harmless(reply, "r"), harmless(arg, "a"), harmless(result, "x")), "x")
		if err != nil {
			t.Fatalf("the hostile session exported, its harmless twin did not: %v", err)
		}
		hs, hstrs := starShape(t, h.Pipeline)
		bs, _ := starShape(t, b.Pipeline)
		if !reflect.DeepEqual(hs, bs) {
			t.Fatalf("the values changed the pipeline's code:\n%s", h.Pipeline)
		}
		has := map[string]bool{}
		for _, s := range hstrs {
			has[s] = true
		}
		for what, v := range map[string]string{"title": title, "metadata key": key, "metadata value": val, "prompt": prompt, "result": result} {
			if v != "" && !has[v] && !bytes.Contains(h.Pipeline, []byte(fmt.Sprintf("%q", v))) {
				t.Errorf("the %s %q is not a string literal of the pipeline:\n%s", what, v, h.Pipeline)
			}
		}
		for _, line := range bytes.Split(h.Fixture, []byte("\n")) {
			if len(line) > 0 && !json.Valid(line) {
				t.Fatalf("fixture line is not JSON: %s", line)
			}
		}
	})
}
