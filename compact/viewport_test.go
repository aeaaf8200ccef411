package compact

import (
	"reflect"
	"slices"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

func TestViewport(t *testing.T) {
	msgs := build("U A*2 T T A U A*3 T T T")
	cost := func(from, to int) int { return EstimateTokens(msgs[from:to]) }
	lastPair := cost(6, 10)
	for _, tt := range []struct {
		name   string
		budget int
		want   string
	}{
		{"everything fits", cost(0, 10), "U A*2 T T A U A*3 T T T"},
		{"the last pair exactly", lastPair, "A*3 T T T"},
		{"the last pair and a bit", lastPair + cost(5, 6) - 1, "A*3 T T T"},
		{"a user message before the pair", lastPair + cost(5, 6), "U A*3 T T T"},
		{"not even the newest pair", lastPair - 1, ""},
		{"zero", 0, ""},
		{"negative", -5, ""},
		{"two pairs need the whole first one", cost(1, 10) - 1, "U A*3 T T T"}, // the leading A is left out: start at a user message
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(msgs)
			got := Viewport(msgs, tt.budget)
			if s := shape(got, -1, -1); s != tt.want {
				t.Errorf("Viewport(%d) = %q, want %q", tt.budget, s, tt.want)
			}
			if !reflect.DeepEqual(msgs, before) {
				t.Errorf("input changed")
			}
			if err := sessions.Validate(got); err != nil {
				t.Errorf("invalid viewport: %v", err)
			}
			if EstimateTokens(got) > max(tt.budget, 0) {
				t.Errorf("over budget")
			}
		})
	}
}

func TestViewportSummary(t *testing.T) {
	msgs := append([]sessions.Message{SummaryMessage(9, StrategyLLM, "the user asked twice")}, build("U A U A*2 T T A")...)
	want := func(n int, body string) string { return header(n, ViewportStrategy) + "\n" + body }
	reserve := EstimateMessage(&sessions.Message{Role: sessions.RoleUser, Text: want(16, "the user asked twice")})
	tail := EstimateTokens(msgs[4:])

	// The summary message and three more are left out: 12 messages.
	got := Viewport(msgs, reserve+tail)
	if len(got) != 5 || got[0].Text != want(12, "the user asked twice") || !reflect.DeepEqual(got[1:], msgs[4:]) {
		t.Errorf("with room for the summary: %s", shape(got, -1, -1))
	}
	if err := sessions.Validate(got); err != nil {
		t.Errorf("invalid viewport: %v", err)
	}

	// Not even the newest unit beside the summary: the newest messages win.
	got = Viewport(msgs, EstimateMessage(&msgs[7]))
	if len(got) != 1 || got[0].Text != msgs[7].Text {
		t.Errorf("newest message must win over the summary: %s", shape(got, -1, -1))
	}

	// The window holds the summary message: nothing to add.
	if got := Viewport(msgs, 1<<20); !reflect.DeepEqual(got, msgs) {
		t.Errorf("everything fits: %s", shape(got, -1, -1))
	}

	// No summary among the messages left out: nothing to add.
	if got := Viewport(msgs[1:], tail); !reflect.DeepEqual(got, msgs[4:]) {
		t.Errorf("no summary: %s", shape(got, -1, -1))
	}

	// Two summaries left out: both bodies, counts added up.
	two := append([]sessions.Message{SummaryMessage(3, StrategyTruncate, "first")}, msgs...)
	both := want(3+9+7, "first\n\nthe user asked twice")
	got = Viewport(two, EstimateMessage(&sessions.Message{Role: sessions.RoleUser, Text: both})+tail)
	if got[0].Text != want(3+9+3, "first\n\nthe user asked twice") || len(got) != 5 {
		t.Errorf("two summaries: %q", got[0].Text)
	}

	// Only the summary fits.
	if got := Viewport(msgs[:1], reserve); !reflect.DeepEqual(got, msgs[:1]) {
		t.Errorf("a lone summary message that fits: %s", shape(got, -1, -1))
	}
	if got := Viewport(msgs[:1], 1); len(got) != 0 {
		t.Errorf("a summary over the budget: %s", shape(got, -1, -1))
	}
	if got := Viewport(msgs[:2], EstimateMessage(&msgs[0])); !reflect.DeepEqual(got, msgs[1:2]) {
		t.Errorf("the newest message wins over a summary message: %s", shape(got, -1, -1))
	}
}
