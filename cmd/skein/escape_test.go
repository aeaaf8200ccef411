package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// TestStoredValuesAreEscaped stores ids, titles, messages and a run whose
// text carries terminal escapes (as an older version could store them,
// or a script through a title) and runs every command that prints them:
// none may write a control character other than newlines and tabs of its
// own layout.
func TestStoredValuesAreEscaped(t *testing.T) {
	const evil = "evil\x1b[2J\nfake\trow\a\u202e\u200b\ufeff\u2028\u2029\u200d"
	store := filepath.Join(t.TempDir(), "sessions.db")
	b, err := sqlite.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	parent := &sessions.Record{ID: evil, Status: sessions.StatusActive, CreatedAt: old, UpdatedAt: old, Title: evil,
		Messages: []message.Message{
			{Role: message.RoleUser, Text: "hi " + evil},
			{Role: message.RoleAssistant, Text: "ok", Model: evil, ToolCalls: []message.ToolCall{{ID: evil, Name: evil, Arguments: map[string]any{"a": "\u009b2J"}}}},
			{Role: message.RoleTool, ToolCallID: evil, Name: evil, Text: evil},
		}}
	child := &sessions.Record{ID: evil + "-fork", Status: sessions.StatusActive, CreatedAt: old, UpdatedAt: old, ParentID: evil}
	for _, rec := range []*sessions.Record{parent, child} {
		if err := b.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CreateRun(ctx, &sessions.RunRecord{ID: "run1", Workflow: evil, Fingerprint: "f", Status: "completed", CreatedAt: old, UpdatedAt: old,
		Head:  []byte(`{"task":"t \u001b[2J","output":"out \u001b[2J\nline 2","next":"x\u001b"}`),
		Steps: [][]byte{[]byte(`{"node":"n\u001b[2J","session_id":"s\u0007","status":"done","output":"o\u001b"}`)}}); err != nil {
		t.Fatal(err)
	}
	b.Close()

	for _, args := range [][]string{
		{"sessions", "ls"},
		{"sessions", "show", "--view", "debug", evil},
		{"sessions", "show", "nope\x1b[2J"},
		{"runs", "ls"},
		{"runs", "show", "run1"},
		{"sessions", "rm", evil},
		{"sessions", "gc", "--older-than", "1d", "--dry-run"},
		{"sessions", "rm", "--recursive", evil},
		{"sessions", "import", "nope\x1b[2J.jsonl"},
	} {
		var out, errOut bytes.Buffer
		code := skein(append(args, "--store", store), stdio{in: strings.NewReader(""), out: &out, err: &errOut})
		t.Logf("%q: exit %d\n%s%s", args, code, out.String(), errOut.String())
		for _, s := range []string{out.String(), errOut.String()} {
			if i := strings.IndexFunc(s, func(r rune) bool {
				return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.In(r, unicode.Bidi_Control, unicode.Cf, unicode.Zl, unicode.Zp))
			}); i >= 0 {
				t.Errorf("%q printed a control character at %d: %q", args, i, s)
			}
		}
		if strings.Contains(out.String(), "\nfake") {
			t.Errorf("%q printed the id's newline: %q", args, out.String())
		}
	}
}
