package sessionstest

import (
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// testSummaryNeverFirstPrompt follows a session's first prompt through a
// compaction, a reopen, then a rewind and a trim that recompute it from
// the messages left: the compaction's summary message, marked in its
// metadata (message.MetaSummary) and stored with the mark, is never the
// first prompt, live or stored.
func testSummaryNeverFirstPrompt(t *testing.T, open opener) {
	h, closeFn := open()
	st, err := sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := h.ctx()
	msg := func(role, text string) message.Message { return message.Message{Role: role, Text: text} }
	apply := func(st *sessions.Store, ch *sessions.Change) {
		t.Helper()
		if _, err := st.Apply(ctx, "s", ch); err != nil {
			t.Fatal(err)
		}
	}
	want := func(st *sessions.Store, step, prompt string) {
		t.Helper()
		meta, err := st.Meta(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := h.b.LoadMeta(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if meta.FirstPrompt != prompt || stored.FirstPrompt != prompt {
			t.Fatalf("%s: first prompt live %q, stored %q; want %q", step, meta.FirstPrompt, stored.FirstPrompt, prompt)
		}
	}
	if _, err := st.Open(ctx, "s", 0); err != nil {
		t.Fatal(err)
	}
	apply(st, &sessions.Change{Append: []message.Message{msg(message.RoleSystem, "be brief"), msg(message.RoleUser, "plan a trip"),
		msg(message.RoleAssistant, "where to?"), msg(message.RoleUser, "Lisbon"), msg(message.RoleAssistant, "ok")}})
	want(st, "before the compaction", "plan a trip")
	body := "a trip to Lisbon"
	summary := message.Message{Role: message.RoleUser, Text: "[auto-compacted 2 older messages via truncate]\n" + body,
		Metadata: map[string]any{message.MetaSummary: true}}
	apply(st, &sessions.Change{Replace: true, ReplaceWith: []message.Message{msg(message.RoleSystem, "be brief"), summary,
		msg(message.RoleUser, "Lisbon"), msg(message.RoleAssistant, "ok")}, SetSummary: true, Summary: &body})
	want(st, "compacted", "plan a trip")
	if err := st.Shutdown(); err != nil {
		t.Fatal(err)
	}
	closeFn()

	h, _ = open()
	st, err = sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown() })
	msgs, err := st.Messages(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || !msgs[1].IsSummary() || msgs[2].IsSummary() {
		t.Fatalf("reopened: %d messages, the summary's mark %v", len(msgs), msgs[1].Metadata)
	}
	apply(st, &sessions.Change{DropLast: 2})
	want(st, "rewound to the summary", "")
	apply(st, &sessions.Change{Append: []message.Message{msg(message.RoleUser, "Porto then"), msg(message.RoleAssistant, "ok")}})
	want(st, "a prompt after the rewind", "Porto then")
	apply(st, &sessions.Change{DropFirst: 1})
	want(st, "trimmed to the summary and after", "Porto then")
}
