package compact

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
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
			if err := message.Validate(got); err != nil {
				t.Errorf("invalid viewport: %v", err)
			}
			if EstimateTokens(got) > max(tt.budget, 0) {
				t.Errorf("over budget")
			}
		})
	}
}

func TestViewportSummary(t *testing.T) {
	msgs := append([]message.Message{SummaryMessage(9, StrategyLLM, "the user asked twice")}, build("U A U A*2 T T A")...)
	want := func(n int, body string) string { return header(n, ViewportStrategy) + "\n" + body }
	reserve := EstimateMessage(&message.Message{Role: message.RoleUser, Text: want(16, "the user asked twice")})
	tail := EstimateTokens(msgs[4:])

	// The summary message and three more are left out: 12 messages.
	got := Viewport(msgs, reserve+tail)
	if len(got) != 5 || got[0].Text != want(12, "the user asked twice") || !reflect.DeepEqual(got[1:], msgs[4:]) {
		t.Errorf("with room for the summary: %s", shape(got, -1, -1))
	}
	if err := message.Validate(got); err != nil {
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
	two := append([]message.Message{SummaryMessage(3, StrategyTruncate, "first")}, msgs...)
	both := want(3+9+7, "first\n\nthe user asked twice")
	got = Viewport(two, EstimateMessage(&message.Message{Role: message.RoleUser, Text: both})+tail)
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

func TestPinnedViewport(t *testing.T) {
	msgs := build("U A*2 T T A U A U A*1 T")
	cost := func(from, to int) int { return EstimateTokens(msgs[from:to]) }
	for _, tt := range []struct {
		name      string
		keepFirst int
		budget    int
		want      string
	}{
		{"zero is Viewport", 0, cost(8, 10), "A* T"},
		{"the first message and the last pair", 1, cost(0, 1) + cost(8, 10), "U A* T"},
		{"the prefix is extended over the pair", 2, cost(0, 4) + cost(8, 10), "U A*2 T T A* T"},
		{"the window starts at a user message", 2, cost(0, 4) + cost(5, 10) + cost(4, 5) - 1, "U A*2 T T U A U A* T"},
		{"no gap: the rest follows the prefix whole", 3, cost(0, 10), "U A*2 T T A U A U A* T"},
		{"only the prefix fits", 2, cost(0, 4), "U A*2 T T"},
		{"beyond the length pins all", 50, cost(0, 10), "U A*2 T T A U A U A* T"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(msgs)
			got, err := PinnedViewport(msgs, tt.keepFirst, tt.budget)
			if err != nil {
				t.Fatal(err)
			}
			if s := shape(got, -1, -1); s != tt.want {
				t.Errorf("PinnedViewport(%d, %d) = %q, want %q", tt.keepFirst, tt.budget, s, tt.want)
			}
			if !reflect.DeepEqual(msgs, before) {
				t.Errorf("input changed")
			}
			if err := message.Validate(got); err != nil {
				t.Errorf("invalid viewport: %v", err)
			}
			if EstimateTokens(got) > tt.budget {
				t.Errorf("over budget")
			}
		})
	}
	_, err := PinnedViewport(msgs, 2, cost(0, 4)-1)
	var pe *PinnedError
	if !errors.As(err, &pe) || pe.Pinned != 4 || pe.Tokens != cost(0, 4) {
		t.Errorf("prefix over budget: got %v, want a PinnedError for 4 messages", err)
	}
	if _, err := PinnedViewport(msgs, -1, 100); err == nil {
		t.Errorf("negative keep_first: no error")
	}
}
