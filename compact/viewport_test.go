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
		{"two pairs need the whole first one", cost(1, 10) - 1, "A U A*3 T T T"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(msgs)
			got := Viewport(msgs, nil, tt.budget)
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
	msgs := build("U A U A*2 T T A")
	summary := "the user asked twice"
	summaryCost := EstimateMessage(&sessions.Message{Role: sessions.RoleUser,
		Text: header(7, ViewportStrategy) + "\n" + summary})
	tail := EstimateTokens(msgs[3:])

	got := Viewport(msgs, &summary, summaryCost+tail)
	if len(got) != 5 || got[0].Text != "[auto-compacted 3 older messages via viewport]\n"+summary || !reflect.DeepEqual(got[1:], msgs[3:]) {
		t.Errorf("with room for the summary: %q", shape(got, -1, -1))
	}
	if err := sessions.Validate(got); err != nil {
		t.Errorf("invalid viewport: %v", err)
	}

	// Not even the newest unit beside the summary: the newest messages win.
	got = Viewport(msgs, &summary, EstimateMessage(&msgs[6]))
	if len(got) != 1 || got[0].Text != msgs[6].Text {
		t.Errorf("newest message must win over the summary: %q", shape(got, -1, -1))
	}

	// Everything fits with the summary: it comes first, counting nothing.
	got = Viewport(msgs, &summary, 1<<20)
	if len(got) != 8 || got[0].Text != "[auto-compacted 0 older messages via viewport]\n"+summary {
		t.Errorf("everything and the summary: %q", got[0].Text)
	}

	// The window already holds the summary message: no second copy.
	withSummary := append([]sessions.Message{SummaryMessage(9, StrategyLLM, summary)}, msgs[2:]...)
	got = Viewport(withSummary, &summary, 1<<20)
	if !reflect.DeepEqual(got, withSummary) {
		t.Errorf("summary duplicated: %q", shape(got, -1, -1))
	}

	// A hidden summary message counts its N in the header.
	got = Viewport(withSummary, &summary, summaryCost+tail)
	if got[0].Text != "[auto-compacted 10 older messages via viewport]\n"+summary || !reflect.DeepEqual(got[1:], msgs[3:]) {
		t.Errorf("hidden summary message: %q", got[0].Text)
	}

	// A summary alone over the budget is left out.
	if got := Viewport(nil, &summary, 1); len(got) != 0 {
		t.Errorf("summary over budget: %q", shape(got, -1, -1))
	}
	if got := Viewport(nil, &summary, summaryCost); len(got) != 1 {
		t.Errorf("empty transcript with a summary: %d messages", len(got))
	}
}
