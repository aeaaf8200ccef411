package compact

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// chooser drives the transcript generator: math/rand for the property
// test, the fuzzer's bytes for the fuzz test.
type chooser interface{ Intn(n int) int }

// byteChooser reads choices from data, then answers 0.
type byteChooser struct {
	data []byte
	i    int
}

func (c *byteChooser) Intn(n int) int {
	if n <= 1 || c.i >= len(c.data) {
		return 0
	}
	b := c.data[c.i]
	c.i++
	return int(b) % n
}

var genTexts = []string{
	"",
	"ok",
	"Please fix the bug in parser.go and run the tests.",
	`{"path": "a.go", "matches": [1, 2, 3]}`,
	"line 1\nline 2\nline 3\nline 4\nline 5",
	strings.Repeat("long output line with some words\n", 30),
	"--- FAIL: TestX\nmain.go:12: boom\n" + strings.Repeat("noise\n", 50),
	"ünïcödé 日本語 " + strings.Repeat("é", 300),
	"[auto-compacted 3 older messages via truncate]\nan earlier summary",
}

// genTranscript returns a valid transcript: system, user and assistant
// messages, block content, thinking, images, parallel tool calls answered
// in any order, failed tools, earlier summary messages.
func genTranscript(c chooser) []message.Message {
	var msgs []message.Message
	text := func() string { return genTexts[c.Intn(len(genTexts))] }
	// A user message needs content (message.CheckShape).
	userText := func() string { return cmp.Or(text(), "go on") }
	calls := 0
	if c.Intn(3) == 0 {
		msgs = append(msgs, system(text()))
	}
	steps := c.Intn(40)
	for range steps {
		switch c.Intn(10) {
		case 0, 1, 2:
			m := user(userText())
			if c.Intn(4) == 0 {
				m = message.Message{Role: message.RoleUser, Blocks: []message.Block{{Type: message.BlockText, Text: text()}}}
				if c.Intn(2) == 0 {
					m.Blocks = append(m.Blocks, message.Block{Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="})
				}
			}
			msgs = append(msgs, m)
		case 3, 4:
			m := asst(text())
			if c.Intn(4) == 0 {
				m = message.Message{Role: message.RoleAssistant, Blocks: []message.Block{
					{Type: message.BlockThinking, Thinking: "hmm", Signature: "sig"},
					{Type: message.BlockText, Text: text()},
				}}
			}
			msgs = append(msgs, m)
		case 5, 6, 7, 8:
			n := 1 + c.Intn(4)
			var cs []message.ToolCall
			for range n {
				calls++
				cs = append(cs, call(fmt.Sprintf("call_%d", calls), []string{"read_file", "run", "grep"}[c.Intn(3)],
					map[string]any{"path": text(), "n": int64(c.Intn(100)), "flags": []any{true, nil, 1.5}}))
			}
			msgs = append(msgs, asst(text(), cs...))
			order := make([]int, n)
			for i := range order {
				order[i] = i
			}
			for i := n - 1; i > 0; i-- {
				j := c.Intn(i + 1)
				order[i], order[j] = order[j], order[i]
			}
			for _, i := range order {
				r := result(cs[i].ID, cs[i].Name, text())
				r.IsError = c.Intn(5) == 0
				if c.Intn(6) == 0 {
					r.Text, r.Blocks = "", []message.Block{{Type: message.BlockText, Text: text()}}
				}
				msgs = append(msgs, r)
			}
		case 9:
			if c.Intn(2) == 0 {
				msgs = append(msgs, system(text()))
			} else {
				msgs = append(msgs, SummaryMessage(c.Intn(50), StrategyObservationMask, text()))
			}
		}
	}
	return msgs
}

// genOptions picks compaction options for strategy.
func genOptions(c chooser, strategy string, msgs []message.Message) Options {
	o := DefaultOptions()
	o.Strategy = strategy
	o.KeepFirst = c.Intn(4)
	o.KeepLast = c.Intn(14)
	if c.Intn(4) == 0 {
		o.TokenThreshold = c.Intn(EstimateTokens(msgs) + 10)
	}
	if c.Intn(3) == 0 {
		o.HardLimitTokens = 1 + c.Intn(EstimateTokens(msgs)+10)
		o.HardLimitStrategy = Strategies[c.Intn(len(Strategies))]
	}
	o.ToolOutputMaxChars = []int{0, 50, 1000}[c.Intn(3)]
	o.Provider = &fakeProvider{text: "model summary"}
	decline := c.Intn(4) == 0
	o.Custom = CompactorFunc(func(_ context.Context, archived []message.Message) (string, error) {
		if decline {
			return "", ErrNoSummary
		}
		return fmt.Sprintf("custom summary of %d", len(archived)), nil
	})
	if c.Intn(2) == 0 {
		o.Mask = func(archived []message.Message) ([]*string, error) {
			out := make([]*string, len(archived))
			for i := range out {
				if i%3 == 0 {
					out[i] = ptr("masked by callback")
				}
			}
			return out, nil
		}
	}
	return o
}

// checkCompaction runs every strategy, trim and the viewport over msgs and
// checks the invariant: valid provider input, kept messages unchanged and
// in order, input untouched.
func checkCompaction(t *testing.T, c chooser, msgs []message.Message, st *stats) {
	t.Helper()
	if err := message.Validate(msgs); err != nil {
		t.Fatalf("generator made an invalid transcript: %v", err)
	}
	before := slices.Clone(msgs)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\ntranscript: %s", fmt.Sprintf(format, args...), shape(msgs, -1, -1))
	}
	for _, strategy := range Strategies {
		o := genOptions(c, strategy, msgs)
		res, err := Compact(context.Background(), msgs, o)
		if err != nil {
			fail("%s: Compact: %v", strategy, err)
		}
		if err := message.Validate(res.Messages); err != nil {
			fail("%s (keep_first %d, keep_last %d, tier2 %v): invalid output: %v\noutput: %s",
				strategy, o.KeepFirst, o.KeepLast, res.Tier2, err, shape(res.Messages, -1, -1))
		}
		if res.TokensAfter != EstimateTokens(res.Messages) || res.TokensBefore != EstimateTokens(msgs) {
			fail("%s: token estimates %d/%d", strategy, res.TokensBefore, res.TokensAfter)
		}
		st.runs++
		if res.Tier2 {
			st.tier2++
		}
		if !res.Compacted {
			if len(res.Messages) != len(msgs) || (len(msgs) > 0 && &res.Messages[0] != &msgs[0]) || res.Tier2 {
				fail("%s: not compacted but the messages changed", strategy)
			}
			continue
		}
		st.compacted++
		out := res.Messages
		lo := 0
		for lo < len(msgs) && lo < len(out) && reflect.DeepEqual(out[lo], msgs[lo]) {
			lo++
		}
		if lo == len(out) {
			fail("%s: compacted output has no summary message (keep_first %d, keep_last %d, hard limit %d %s): %s", strategy, o.KeepFirst, o.KeepLast, o.HardLimitTokens, o.HardLimitStrategy, shape(out, -1, -1))
		}
		if _, ok := ParseSummary(&out[lo]); !ok {
			fail("%s: message %d is not a summary message: %q", strategy, lo, out[lo].Text)
		}
		suffix := out[lo+1:]
		cut := len(msgs) - len(suffix)
		if cut <= lo || !sameMessages(suffix, msgs[cut:]) {
			fail("%s: kept suffix of %d messages is not the input's tail", strategy, len(suffix))
		}
		if len(suffix) < o.KeepLast {
			st.shortSuffix++
		}
		if lo < o.KeepFirst || res.Archived != cut-lo {
			fail("%s: prefix %d (keep_first %d), archived %d of [%d, %d)", strategy, lo, o.KeepFirst, res.Archived, lo, cut)
		}
		if !res.Tier2 && (o.KeepLast > 0 || cut < len(msgs)) {
			// Rule 4: with a user message between the prefix and the plain
			// cut, the suffix starts at the latest one (keep_last 0 archives
			// everything instead, rule 3).
			latest := -1
			for j := min(len(msgs)-o.KeepLast, len(msgs)-1); j > lo; j-- {
				if msgs[j].Role == message.RoleUser {
					latest = j
					break
				}
			}
			if latest >= 0 && cut != latest {
				fail("%s: cut %d, want the user message at %d (keep_first %d, keep_last %d)", strategy, cut, latest, o.KeepFirst, o.KeepLast)
			}
		}
	}

	for keep := range len(msgs) + 2 {
		drop := sessions.TrimDrop(message.NewTranscript(msgs), keep)
		if err := message.Validate(msgs[drop:]); err != nil {
			fail("trim to %d: %v", keep, err)
		}
	}

	budget := c.Intn(EstimateTokens(msgs) + 100)
	view := Viewport(msgs, budget)
	if err := message.Validate(view); err != nil {
		fail("viewport %d: %v", budget, err)
	}
	if len(view) > 0 && len(view) < len(msgs) {
		st.partialViews++
	}
	if EstimateTokens(view) > budget {
		fail("viewport over budget: %d > %d", EstimateTokens(view), budget)
	}
	window := view
	if len(view) > 0 {
		if s, ok := ParseSummary(&view[0]); ok && s.Strategy == ViewportStrategy {
			window = view[1:]
			hidden := msgs[:len(msgs)-len(window)]
			if s.Body != RunningSummary(hidden) || s.Count != standsFor(hidden) {
				fail("viewport summary %q does not summarise the %d messages left out", view[0].Text, len(hidden))
			}
		}
	}
	if len(window) > len(msgs) || !sameMessages(window, msgs[len(msgs)-len(window):]) {
		fail("viewport window is not the input's tail")
	}
	if !reflect.DeepEqual(msgs, before) {
		fail("input modified")
	}
}

// stats counts what the property test exercised.
type stats struct{ runs, compacted, tier2, shortSuffix, partialViews int }

func TestCompactValidProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(20240601))
	var st stats
	for range 2000 {
		checkCompaction(t, rng, genTranscript(rng), &st)
	}
	t.Logf("%+v", st)
	if st.compacted < st.runs/3 || st.tier2 < 100 || st.shortSuffix < 20 || st.partialViews < 300 {
		t.Errorf("the generator exercises too little: %+v", st)
	}
}

func FuzzCompactValid(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 30, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4})
	f.Add([]byte("\x01\x27\x05\x03\x02\x06\x01\x00\x07\x04\x08\x09\x05\x05\x05\x02\x03\x06\x01\x00"))
	f.Add([]byte("tool-heavy transcripts with parallel calls and summaries \xff\xfe\x09\x09\x09"))
	f.Add([]byte(strings.Repeat("\x05\x03\x01\x02", 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		checkCompaction(t, c, genTranscript(c), &stats{})
	})
}

// sameMessages reports whether a and b hold equal messages (nil and empty
// are the same).
func sameMessages(a, b []message.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
