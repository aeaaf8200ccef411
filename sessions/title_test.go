package sessions

import (
	"github.com/skein-dev/skein/sessions/message"
	"testing"
)

// TestFirstPromptKept follows a session's FirstPrompt through the writes
// that change which user message comes first.
func TestFirstPromptKept(t *testing.T) {
	b := NewMemoryBackend()
	s := newTestStore(t, b, 8)
	mustOpen(t, s, "a")
	want := func(step, prompt string) {
		t.Helper()
		meta, err := s.Meta(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := b.LoadMeta(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if meta.FirstPrompt != prompt || stored.FirstPrompt != prompt {
			t.Fatalf("%s: FirstPrompt live %q, stored %q; want %q", step, meta.FirstPrompt, stored.FirstPrompt, prompt)
		}
	}
	user := func(text string) message.Message { return message.Message{Role: message.RoleUser, Text: text} }
	mustAppend(t, s, "a", message.Message{Role: message.RoleSystem, Text: "be brief"})
	want("system only", "")
	mustAppend(t, s, "a", user("  \n  first question  \nmore"))
	want("first user message", "first question")
	mustAppend(t, s, "a", message.Message{Role: message.RoleAssistant, Text: "ok"}, user("second"))
	want("later messages", "first question")
	if _, err := s.Apply(ctx, "a", &Change{DropFirst: 3}); err != nil {
		t.Fatal(err)
	}
	want("trimmed", "second")
	mustAppend(t, s, "a", message.Message{Role: message.RoleAssistant, Text: "ok"}, user("third"))
	if _, err := s.Fork(ctx, "a", "child", ForkOptions{KeepFirst: 3}); err != nil {
		t.Fatal(err)
	}
	if meta, _ := s.Meta(ctx, "child"); meta.FirstPrompt != "second" {
		t.Fatalf("fork: FirstPrompt %q, want %q", meta.FirstPrompt, "second")
	}
	if _, err := s.Apply(ctx, "a", &Change{DropLast: 3}); err != nil {
		t.Fatal(err)
	}
	want("rewound to nothing", "")
	mustAppend(t, s, "a", user("again"))
	want("after the rewind", "again")
	if _, err := s.Apply(ctx, "a", &Change{Replace: true, ReplaceWith: []message.Message{user("summary: x")}}); err != nil {
		t.Fatal(err)
	}
	want("replaced", "summary: x")
	if _, err := s.Apply(ctx, "a", &Change{Replace: true}); err != nil {
		t.Fatal(err)
	}
	want("reset", "")
	mustAppend(t, s, "a", user("plan a trip"), message.Message{Role: message.RoleAssistant, Text: "where to?"}, user("Lisbon"))
	want("before a compaction", "plan a trip")
	summary := "a trip to Lisbon"
	mark := map[string]any{message.MetaSummary: true}
	compacted := []message.Message{{Role: message.RoleUser, Text: "[auto-compacted 2 older messages via truncate]\n" + summary, Metadata: mark}, user("Lisbon")}
	if _, err := s.Apply(ctx, "a", &Change{Replace: true, ReplaceWith: compacted, SetSummary: true, Summary: &summary}); err != nil {
		t.Fatal(err)
	}
	want("compacted", "plan a trip")
	if _, err := s.Apply(ctx, "a", &Change{Replace: true, SetSummary: true}); err != nil {
		t.Fatal(err)
	}
	want("reset after the compaction", "")
	if _, err := s.Apply(ctx, "a", &Change{Replace: true, ReplaceWith: compacted, SetSummary: true, Summary: &summary}); err != nil {
		t.Fatal(err)
	}
	want("a summary is never the first prompt", "Lisbon")
}

// TestSlug: ASCII letters and digits, lower-cased; runs of other ASCII
// become one hyphen; non-ASCII is dropped (the agent-session specification's kebab slug).
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ title, want string }{
		{"Fix: the {parser}!", "fix-the-parser"},
		{"ünïcode", "ncode"},
		{"Café au lait", "caf-au-lait"},
		{"日本語", "exported-session"},
		{"", "exported-session"},
		{"  --Hello   World--  ", "hello-world"},
		{"\u212a elvin", "elvin"}, // the Kelvin sign lower-cases to an ASCII k: still dropped
		{"v2.0 release", "v2-0-release"},
	} {
		if got := Slug(tc.title); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.title, got, tc.want)
		}
	}
}
