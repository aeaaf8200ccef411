package compact

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

// benchSession returns n messages in which 30% are tool results: blocks of
// ten messages (user, assistant calling a tool, its result, assistant
// calling a tool, its result, assistant, user, assistant calling a tool,
// its result, assistant). Texts are shared, so memory holds mostly headers.
func benchSession(n int) []message.Message {
	question := "Please look at the failing integration test in the payments package and tell me what broke."
	answer := strings.Repeat("I checked the handler and the retry logic; the timeout is too short for the sandbox. ", 3)
	output := strings.Repeat("2025-01-01T12:00:00Z INFO payments: processed batch 42 in 12ms (ok)\n", 20) +
		"payments_test.go:88: expected status 200, got 504\n"
	msgs := make([]message.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		id := func(k int) string { return fmt.Sprintf("c%d_%d", i, k) }
		args := map[string]any{"path": "payments/handler.go", "line": int64(i)}
		block := []message.Message{
			user(question),
			asst("Let me run the tests.", call(id(1), "run", map[string]any{"cmd": "go test ./payments/..."})),
			result(id(1), "run", output),
			asst("", call(id(2), "read_file", args)),
			result(id(2), "read_file", output),
			asst(answer),
			user("Go ahead and fix it, then rerun."),
			asst("Rerunning.", call(id(3), "run", map[string]any{"cmd": "go test ./payments/..."})),
			result(id(3), "run", output),
			asst(answer),
		}
		msgs = append(msgs, block[:min(len(block), n-len(msgs))]...)
	}
	return msgs
}

func contentBytes(msgs []message.Message) int64 {
	var n int
	for i := range msgs {
		n += len(msgs[i].Text)
		for _, c := range msgs[i].ToolCalls {
			n += len(c.Name) + jsonSize(c.Arguments)
		}
	}
	return int64(n)
}

func BenchmarkCompactObservationMask100k(b *testing.B) {
	msgs := benchSession(100_000)
	o := DefaultOptions()
	b.ReportAllocs()
	for b.Loop() {
		res, err := Compact(context.Background(), msgs, o)
		if err != nil || !res.Compacted {
			b.Fatalf("compact: %v", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}

func BenchmarkEstimateTokens100k(b *testing.B) {
	msgs := benchSession(100_000)
	b.SetBytes(contentBytes(msgs))
	b.ReportAllocs()
	for b.Loop() {
		EstimateTokens(msgs)
	}
}

func BenchmarkMicrocompact1MB(b *testing.B) {
	text := strings.Repeat(benchSession(3)[2].Text, 1<<20/1500)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Microcompact(text, 16_000)
	}
}

func BenchmarkViewport100k(b *testing.B) {
	msgs := benchSession(100_000)
	msgs[0] = SummaryMessage(5000, StrategyObservationMask, "an earlier summary")
	b.ReportAllocs()
	for b.Loop() {
		Viewport(msgs, 48_000)
	}
}
