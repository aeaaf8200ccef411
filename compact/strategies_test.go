package compact

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

const testOutput = `--- FAIL: TestParse (0.00s)
    parser_test.go:31: got 4 tokens, want 5
FAIL
FAIL	example.com/parser	0.002s
FAIL
exit status 1`

const parserSource = `package parser

// Parse splits s into tokens.
func Parse(s string) []string {
	var out []string
	for i := 0; i < len(s)-1; i++ {
		out = append(out, s[i:i+1])
	}
	return out
}`

// session is the transcript the golden tests compact with KeepLast 2: the
// cut snaps back to the user message at index 7, archiving 0..6.
func session() []message.Message {
	return []message.Message{
		user("Fix the failing test in parser.go"),
		asst("I'll look at the test output first.", call("c1", "run", map[string]any{"cmd": "go test ./..."})),
		result("c1", "run", testOutput),
		asst("", call("c2", "read_file", map[string]any{"path": "parser.go"}),
			call("c3", "grep", map[string]any{"pattern": "TODO", "path": "."})),
		result("c2", "read_file", parserSource),
		result("c3", "grep", "parser.go:12: // TODO handle unicode"),
		asst("The bug is an off-by-one in Parse."),
		user("Go ahead and fix it."),
		asst("Done.", call("c4", "write_file", map[string]any{"path": "parser.go", "content": strings.Repeat("x", 300)})),
		result("c4", "write_file", "ok"),
		asst("Fixed."),
	}
}

func compactWith(t *testing.T, msgs []message.Message, opts Options) *Result {
	t.Helper()
	res, err := Compact(context.Background(), msgs, opts)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if err := message.Validate(res.Messages); err != nil {
		t.Fatalf("Compact output is invalid: %v", err)
	}
	return res
}

func opts(strategy string, keepLast int) Options {
	o := DefaultOptions()
	o.Strategy = strategy
	o.KeepLast = keepLast
	return o
}

func TestObservationMaskGolden(t *testing.T) {
	msgs := session()
	res := compactWith(t, msgs, opts(StrategyObservationMask, 2))
	const want = `[auto-compacted 7 older messages via observation_mask]
[user] Fix the failing test in parser.go
[assistant] I'll look at the test output first. called run(cmd="go test ./...")
[tool run] --- FAIL: TestParse (0.00s) [6 lines, 126 chars masked]
[assistant] called read_file(path="parser.go"), grep(path=".", pattern="TODO")
[tool read_file] package parser [10 lines, 176 chars masked]
[tool grep] parser.go:12: // TODO handle unicode
[assistant] The bug is an off-by-one in Parse.`
	if got := res.Messages[0].Text; got != want {
		t.Errorf("summary message:\n%s\nwant:\n%s", got, want)
	}
	if res.Summary != strings.SplitN(want, "\n", 2)[1] {
		t.Errorf("Summary = %q, want the body of the summary message", res.Summary)
	}
	if !res.Compacted || res.Tier2 || res.Archived != 7 || res.Strategy != StrategyObservationMask {
		t.Errorf("result = %+v", res)
	}
	if !reflect.DeepEqual(res.Messages[1:], msgs[7:]) {
		t.Errorf("kept suffix changed")
	}
	if res.TokensAfter >= res.TokensBefore || res.TokensAfter != EstimateTokens(res.Messages) {
		t.Errorf("tokens before %d after %d", res.TokensBefore, res.TokensAfter)
	}
}

func TestTruncateGolden(t *testing.T) {
	res := compactWith(t, session(), opts(StrategyTruncate, 2))
	const want = `[auto-compacted 7 older messages via truncate]
[user] Fix the failing test in parser.go
[assistant] I'll look at the test output first. called run(cmd="go test ./...")
[tool run] --- FAIL: TestParse (0.00s) parser_test.go:31: got 4 tokens, want 5 FAIL FAIL example.com/parser 0.002s FAIL exit status 1
[assistant] called read_file(path="parser.go"), grep(path=".", pattern="TODO")
[tool read_file] package parser // Parse splits s into tokens. func Parse(s string) []string { var out []string for i := 0; i < len(s)-1; i++ { out = append(out, s[i:i+1]) } return out }
[tool grep] parser.go:12: // TODO handle unicode
[assistant] The bug is an off-by-one in Parse.`
	if got := res.Messages[0].Text; got != want {
		t.Errorf("summary message:\n%s\nwant:\n%s", got, want)
	}
}

func TestTruncateLimits(t *testing.T) {
	var msgs []message.Message
	for i := range 10 {
		msgs = append(msgs, user(fmt.Sprintf("question %d", i)), asst(fmt.Sprintf("answer %d", i)))
	}
	msgs[1] = asst(strings.Repeat("word ", 120)) // 600 bytes
	msgs[2] = user("")
	msgs[3] = asst("", call("c1", "write_file", map[string]any{"path": "a.txt", "content": strings.Repeat("é", 150), "n": int64(3), "f": 1.5, "ok": true, "tags": []any{"x", nil}}))
	msgs[4] = result("c1", "", "line one\n\n   line two\t\tend")
	msgs[4].IsError = true
	res := compactWith(t, msgs, opts(StrategyTruncate, 0))
	lines := strings.Split(res.Messages[0].Text, "\n")
	if len(lines) != 1+15+1 {
		t.Fatalf("got %d lines, want header, 15 entries and the count:\n%s", len(lines), res.Messages[0].Text)
	}
	long := "[assistant] " + strings.TrimSpace(strings.Repeat("word ", 100)) + "..."
	wants := map[int]string{
		1:  "[user] question 0",
		2:  long,
		3:  "[user]",
		4:  `[assistant] called write_file(content="` + strings.Repeat("é", 99) + `..., f=1.5, n=3, ok=true, path="a.txt", tags=["x",null])`,
		5:  "[tool error] line one line two end",
		16: "... and 5 more",
	}
	for i, want := range wants {
		if lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	if len(lines[2]) != len("[assistant] ")+500+len("...")-1 { // the cut drops the space at 500
		t.Errorf("long entry has %d bytes", len(lines[2]))
	}
}

func TestMaskOverrides(t *testing.T) {
	msgs := session()
	var seen []message.Message
	o := opts(StrategyObservationMask, 2)
	o.Mask = func(archived []message.Message) ([]*string, error) {
		seen = archived
		out := make([]*string, len(archived))
		out[1] = ptr("asked to run the tests")
		out[4] = ptr("func Parse(s string) []string")
		return out, nil
	}
	res := compactWith(t, msgs, o)
	if !reflect.DeepEqual(seen, msgs[:7]) {
		t.Errorf("mask callback saw %d messages, want the 7 archived ones", len(seen))
	}
	lines := strings.Split(res.Messages[0].Text, "\n")
	if lines[2] != "[assistant] asked to run the tests" || lines[5] != "[tool read_file] func Parse(s string) []string" {
		t.Errorf("overrides not applied:\n%s", res.Messages[0].Text)
	}
	if lines[3] != "[tool run] --- FAIL: TestParse (0.00s) [6 lines, 126 chars masked]" {
		t.Errorf("nil entry did not keep the default mask: %q", lines[3])
	}

	o.Mask = func(archived []message.Message) ([]*string, error) { return make([]*string, 2), nil }
	_, err := Compact(context.Background(), msgs, o)
	if err == nil || err.Error() != "mask_callback: got 2 entries for 7 messages, want one per message" {
		t.Errorf("wrong length: err = %v", err)
	}
	boom := errors.New("boom")
	o.Mask = func([]message.Message) ([]*string, error) { return nil, boom }
	if _, err := Compact(context.Background(), msgs, o); err != boom {
		t.Errorf("callback error = %v, want it unchanged", err)
	}
}

func TestLLMStrategy(t *testing.T) {
	msgs := session()
	p := &fakeProvider{text: "  The user wants parser.go fixed; Parse has an off-by-one.\n"}
	o := opts(StrategyLLM, 2)
	o.Provider, o.Model = p, "claude-test"
	res := compactWith(t, msgs, o)
	if len(p.reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(p.reqs))
	}
	req := p.reqs[0]
	if req.Model != "claude-test" || req.System != DefaultSummarizePrompt || len(req.Tools) != 0 {
		t.Errorf("request model %q, system %q, tools %v", req.Model, req.System, req.Tools)
	}
	wantUser := `Summarize these 7 archived messages.

[user] Fix the failing test in parser.go

[assistant] I'll look at the test output first. called run(cmd="go test ./...")

[tool run] ` + testOutput + `

[assistant] called read_file(path="parser.go"), grep(path=".", pattern="TODO")

[tool read_file] ` + parserSource + `

[tool grep] parser.go:12: // TODO handle unicode

[assistant] The bug is an off-by-one in Parse.`
	if len(req.Messages) != 1 || req.Messages[0].Role != message.RoleUser || req.Messages[0].Text != wantUser {
		t.Errorf("request messages = %+v\nwant one user message:\n%s", req.Messages, wantUser)
	}
	wantSummary := "[auto-compacted 7 older messages via llm]\nThe user wants parser.go fixed; Parse has an off-by-one."
	if res.Messages[0].Text != wantSummary || res.Summary != "The user wants parser.go fixed; Parse has an off-by-one." {
		t.Errorf("summary message %q, Summary %q", res.Messages[0].Text, res.Summary)
	}

	o.SummarizePrompt = "Summarise briefly."
	compactWith(t, msgs, o)
	if got := p.reqs[1].System; got != "Summarise briefly." {
		t.Errorf("SummarizePrompt not used: system %q", got)
	}

	p.text = " \n"
	if _, err := Compact(context.Background(), msgs, o); err == nil || err.Error() != "llm summary: the model returned no text" {
		t.Errorf("empty reply: err = %v", err)
	}
	p.err = errors.New("overloaded")
	if _, err := Compact(context.Background(), msgs, o); !errors.Is(err, p.err) || !strings.HasPrefix(err.Error(), "llm summary: ") {
		t.Errorf("provider error: err = %v", err)
	}
}

func TestCustomStrategy(t *testing.T) {
	msgs := session()
	var seen []message.Message
	o := opts(StrategyCustom, 2)
	o.Custom = CompactorFunc(func(ctx context.Context, archived []message.Message) (string, error) {
		seen = archived
		return "custom summary", nil
	})
	res := compactWith(t, msgs, o)
	if !reflect.DeepEqual(seen, msgs[:7]) {
		t.Errorf("compactor saw %d messages, want the 7 archived ones", len(seen))
	}
	if res.Messages[0].Text != "[auto-compacted 7 older messages via custom]\ncustom summary" || res.Summary != "custom summary" {
		t.Errorf("summary message %q", res.Messages[0].Text)
	}

	// None: the transcript stays as it is.
	o.Custom = CompactorFunc(func(context.Context, []message.Message) (string, error) { return "", ErrNoSummary })
	res, err := Compact(context.Background(), msgs, o)
	if err != nil || res.Compacted || &res.Messages[0] != &msgs[0] || res.Summary != "" || res.Strategy != "" {
		t.Errorf("declined: err %v, result %+v", err, res)
	}

	boom := errors.New("boom")
	o.Custom = CompactorFunc(func(context.Context, []message.Message) (string, error) { return "", boom })
	if _, err := Compact(context.Background(), msgs, o); err != boom {
		t.Errorf("compactor error = %v, want it unchanged", err)
	}

	// ToolOutputMaxChars shortens the long tool outputs the compactor sees,
	// without touching the input.
	o.ToolOutputMaxChars = 100
	o.Custom = CompactorFunc(func(ctx context.Context, archived []message.Message) (string, error) {
		seen = archived
		return "s", nil
	})
	compactWith(t, msgs, o)
	if seen[2].Text != Microcompact(testOutput, 100) || seen[4].Text != Microcompact(parserSource, 100) || seen[5].Text != msgs[5].Text {
		t.Errorf("tool outputs not microcompacted: %q", seen[2].Text)
	}
	if msgs[2].Text != testOutput {
		t.Errorf("input modified")
	}
}
