package compact

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

func TestCompactNoOp(t *testing.T) {
	msgs := session()
	for _, tt := range []struct {
		name string
		opts func(*Options)
	}{
		{"under keep_last", func(o *Options) {}}, // 11 messages, keep_last 12
		{"under keep_first+keep_last", func(o *Options) { o.KeepFirst, o.KeepLast = 6, 5 }},
		{"under the token threshold", func(o *Options) { o.KeepLast = 2; o.TokenThreshold = EstimateTokens(msgs) + 1 }},
		{"only the pair at the end", func(o *Options) { o.KeepFirst, o.KeepLast = 9, 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.opts(&o)
			res := compactWith(t, msgs, o)
			if res.Compacted || res.Tier2 || len(res.Messages) != len(msgs) || &res.Messages[0] != &msgs[0] {
				t.Errorf("compacted: %+v", res)
			}
			if res.Summary != "" || res.Archived != 0 || res.TokensBefore != res.TokensAfter || res.TokensBefore != EstimateTokens(msgs) {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestCompactThresholdReached(t *testing.T) {
	msgs := session()
	o := opts(StrategyTruncate, 2)
	o.TokenThreshold = EstimateTokens(msgs)
	if res := compactWith(t, msgs, o); !res.Compacted {
		t.Errorf("not compacted at the threshold")
	}
}

func TestCompactKeepsToolPairAtCut(t *testing.T) {
	// keep_last 3 puts the plain cut between A*2 and its first result; no
	// user message follows the first, so the cut moves back to the A*2.
	msgs := []message.Message{
		user("task"),
		asst("", call("a", "ls", nil)),
		result("a", "ls", "x"),
		asst("", call("b", "cat", map[string]any{"f": "x"}), call("c", "cat", map[string]any{"f": "y"})),
		result("c", "cat", "Y"),
		result("b", "cat", "X"),
	}
	res := compactWith(t, msgs, opts(StrategyObservationMask, 2))
	if len(res.Messages) != 4 || !reflect.DeepEqual(res.Messages[1:], msgs[3:]) {
		t.Fatalf("kept %d messages: %+v", len(res.Messages)-1, res.Messages)
	}
	want := "[auto-compacted 3 older messages via observation_mask]\n[user] task\n[assistant] called ls()\n[tool ls] x"
	if res.Messages[0].Text != want {
		t.Errorf("summary %q, want %q", res.Messages[0].Text, want)
	}
}

func TestCompactKeepFirstAndSystem(t *testing.T) {
	msgs := append([]message.Message{system("be brief")}, session()...)
	o := opts(StrategyTruncate, 2)
	o.KeepFirst = 1
	res := compactWith(t, msgs, o)
	if res.Messages[0].Role != message.RoleSystem || !strings.HasPrefix(res.Messages[1].Text, "[auto-compacted 7 older messages via truncate]\n[user] Fix") {
		t.Errorf("prefix not kept: %+v", res.Messages[:2])
	}
	if !reflect.DeepEqual(res.Messages[2:], msgs[8:]) {
		t.Errorf("suffix changed")
	}
}

func TestCompactRunningSummary(t *testing.T) {
	msgs := session()
	first := compactWith(t, msgs, opts(StrategyObservationMask, 2))

	// Later: more turns, then a second compaction archives the first
	// summary message, carries its body over verbatim and counts its N.
	later := append(append([]message.Message(nil), first.Messages...),
		user("Now add a test."), asst("Added TestParseUnicode."), user("Thanks"), asst("You're welcome."))
	second := compactWith(t, later, opts(StrategyObservationMask, 2))
	body := first.Summary + "\n[user] Go ahead and fix it.\n" +
		`[assistant] Done. called write_file(content="` + strings.Repeat("x", 199) + `..., path="parser.go")` + "\n" +
		"[tool write_file] ok\n[assistant] Fixed.\n[user] Now add a test.\n[assistant] Added TestParseUnicode."
	if second.Messages[0].Text != "[auto-compacted 13 older messages via observation_mask]\n"+body {
		t.Errorf("second summary:\n%s", second.Messages[0].Text)
	}
	if second.Summary != body || second.Archived != 7 {
		t.Errorf("Summary %q, Archived %d", second.Summary, second.Archived)
	}
	// Each summary message is marked as one, for the store's first
	// prompt; the messages kept are not.
	for _, m := range [][]message.Message{first.Messages, second.Messages} {
		if !m[0].IsSummary() || m[1].IsSummary() {
			t.Errorf("summary marks: %v, %v", m[0].Metadata, m[1].Metadata)
		}
	}
	if m := SummaryMessage(3, StrategyTruncate, "b"); !m.IsSummary() {
		t.Errorf("SummaryMessage is not marked: %v", m.Metadata)
	}

	// The earlier summary kept in a longer prefix: the running summary
	// keeps it and appends the new body.
	o := opts(StrategyTruncate, 2)
	o.KeepFirst = 1
	third := compactWith(t, later, o)
	if third.Messages[0].Text != later[0].Text {
		t.Fatalf("prefix not kept")
	}
	newBody := strings.SplitN(third.Messages[1].Text, "\n", 2)[1]
	if third.Summary != first.Summary+"\n\n"+newBody {
		t.Errorf("running summary = %q", third.Summary)
	}

	// Nothing new to compact: only the summary message would be archived.
	again := compactWith(t, first.Messages, opts(StrategyObservationMask, 4))
	if again.Compacted {
		t.Errorf("re-compacted a lone summary message: %q", again.Messages[0].Text)
	}
}

func TestTier2(t *testing.T) {
	big := strings.Repeat("output line\n", 200)
	var msgs []message.Message
	for i := range 5 {
		msgs = append(msgs, user("old question"), asst("old answer "+strings.Repeat("blah ", 40*i)))
	}
	// The last user message is followed by a long tool run: tier 1 snaps to
	// it and keeps 9 messages though keep_last is 3.
	msgs = append(msgs, user("investigate"))
	for i := range 4 {
		id := string(rune('a' + i))
		msgs = append(msgs, asst("", call(id, "run", nil)), result(id, "run", big))
	}
	o := opts(StrategyObservationMask, 3)

	tier1 := compactWith(t, msgs, o)
	if tier1.Tier2 || len(tier1.Messages) != 10 {
		t.Fatalf("tier 1 kept %d messages, want summary + 9", len(tier1.Messages))
	}

	o.HardLimitTokens = tier1.TokensAfter - 1
	res := compactWith(t, msgs, o)
	if !res.Tier2 || !res.Compacted || res.Strategy != StrategyTruncate {
		t.Fatalf("tier 2 did not run: %+v", res)
	}
	// Tier 2 archived the tier-1 summary and the suffix up to the plain cut
	// moved back to the assistant message starting the pair.
	if len(res.Messages) != 5 || !reflect.DeepEqual(res.Messages[1:], msgs[len(msgs)-4:]) {
		t.Fatalf("tier 2 kept %d messages", len(res.Messages)-1)
	}
	head, body, _ := strings.Cut(res.Messages[0].Text, "\n")
	if head != "[auto-compacted 15 older messages via truncate]" {
		t.Errorf("header %q", head)
	}
	lines := strings.Split(body, "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "[summary] [user] old question [assistant] old answer") ||
		!strings.HasSuffix(lines[0], "...") || lines[1] != "[user] investigate" || lines[2] != "[assistant] called run()" {
		t.Errorf("tier-2 body:\n%s", body)
	}
	if res.Archived != 15 || res.Summary != body || res.TokensAfter != EstimateTokens(res.Messages) || res.TokensAfter >= tier1.TokensAfter {
		t.Errorf("result: archived %d, tokens %d", res.Archived, res.TokensAfter)
	}

	// Over the limit after tier 1 with exactly keep_last kept: tier 2
	// re-summarises the tier-1 summary alone.
	o.KeepLast = 9
	o.HardLimitTokens = 1
	res = compactWith(t, msgs, o)
	if !res.Tier2 || len(res.Messages) != 10 || !strings.HasPrefix(res.Messages[0].Text, "[auto-compacted 10 older messages via truncate]\n[summary] [user] old question") {
		t.Errorf("tier 2 over the summary alone: %q", res.Messages[0].Text)
	}
	if strings.Count(res.Messages[0].Text, "\n") != 1 {
		t.Errorf("tier-2 summary should be one entry: %q", res.Messages[0].Text)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		opts func(*Options)
		want string
	}{
		{func(o *Options) { o.KeepLast = -1 }, "'keep_last' must be >= 0"},
		{func(o *Options) { o.KeepFirst = -1 }, "'keep_first' must be >= 0"},
		{func(o *Options) { o.TokenThreshold = -1 }, "'token_threshold' must be >= 0"},
		{func(o *Options) { o.HardLimitTokens = -1 }, "'hard_limit_tokens' must be >= 0"},
		{func(o *Options) { o.ToolOutputMaxChars = -1 }, "'tool_output_max_chars' must be >= 0"},
		{func(o *Options) { o.Strategy = "x" }, "unknown compact_strategy 'x' (expected one of: custom, llm, observation_mask, truncate)"},
		{func(o *Options) { o.HardLimitStrategy = "x" }, "unknown hard_limit_strategy 'x' (expected one of: custom, llm, observation_mask, truncate)"},
		{func(o *Options) { o.Strategy = "custom" }, "compact_strategy 'custom' needs a custom_compactor"},
		{func(o *Options) { o.Strategy = "llm" }, "compact_strategy 'llm' needs a provider"},
		{func(o *Options) { o.HardLimitTokens, o.HardLimitStrategy = 10, "llm" }, "hard_limit_strategy 'llm' needs a provider"},
		{func(o *Options) { o.HardLimitStrategy = "llm" }, ""}, // unused without a hard limit
		{func(o *Options) { *o = Options{} }, ""},              // "" strategies mean the defaults
	} {
		o := DefaultOptions()
		tt.opts(&o)
		err := o.Validate()
		if got := errString(err); got != tt.want {
			t.Errorf("Validate() = %q, want %q", got, tt.want)
		}
		if _, err := Compact(context.Background(), session(), o); errString(err) != tt.want {
			t.Errorf("Compact error = %q, want %q", errString(err), tt.want)
		}
	}
}

func TestCompactCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compact(ctx, session(), DefaultOptions()); err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRunningSummary(t *testing.T) {
	for _, tt := range []struct {
		msgs []message.Message
		want string
	}{
		{nil, ""},
		{session(), ""},
		{[]message.Message{SummaryMessage(3, StrategyLLM, "one"), user("x"), SummaryMessage(2, StrategyTruncate, "two")}, "one\n\ntwo"},
		{[]message.Message{user("[auto-compacted 3 older messages via llm]")}, ""},
		{[]message.Message{user("[auto-compacted x older messages via llm]\nno")}, ""},
		{[]message.Message{user("[auto-compacted 3 older messages via LLM]\nno")}, ""},
		{[]message.Message{asst("[auto-compacted 3 older messages via llm]\nno")}, ""},
	} {
		if got := RunningSummary(tt.msgs); got != tt.want {
			t.Errorf("RunningSummary(%s) = %q, want %q", shape(tt.msgs, -1, -1), got, tt.want)
		}
	}
}

func TestTier2ReproducingASummaryDoesNothing(t *testing.T) {
	// Tier 1 skips the lone summary; tier 2 (observation_mask) would carry
	// its body over into an identical message.
	msgs := []message.Message{user("task"), asst("done"), SummaryMessage(5, StrategyObservationMask, "earlier work")}
	o := opts(StrategyObservationMask, 0)
	o.KeepFirst = 2
	o.HardLimitTokens, o.HardLimitStrategy = 1, StrategyObservationMask
	res := compactWith(t, msgs, o)
	if res.Compacted || res.Tier2 || &res.Messages[0] != &msgs[0] || res.Summary != "earlier work" {
		t.Errorf("result = %+v", res)
	}
	// With truncate as the hard-limit strategy the summary is re-rendered.
	o.HardLimitStrategy = StrategyTruncate
	res = compactWith(t, msgs, o)
	if !res.Tier2 || res.Messages[2].Text != "[auto-compacted 5 older messages via truncate]\n[summary] earlier work" {
		t.Errorf("tier 2 over a lone summary: %+v", res)
	}
}
