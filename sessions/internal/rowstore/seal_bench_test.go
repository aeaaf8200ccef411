//go:build unix

package rowstore

import (
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// cpuTime returns the process's CPU time so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSealMessage is the cost of storing and reading back a typical
// message (an assistant reply with a tool call, about 250 bytes of
// JSON): encoding it (EncodeMessage), checking and decoding it (Verify,
// DecodeMessage), plain (JSON and CRC-32C) and sealed (the same JSON,
// AES-256-GCM with a random nonce, base64). Each iteration does a batch
// of 200 messages each way, plain and sealed taking turns at going
// first; it reports the CPU time (the process's user and system time:
// what a loaded machine does not inflate) and the wall time per message
// of each, and the CPU ratio sealed/plain.
func BenchmarkSealMessage(b *testing.B) {
	const batch = 200
	k, err := storekey.Parse(storekey.Generate())
	if err != nil {
		b.Fatal(err)
	}
	m := message.Message{ID: "0195925c-2f1d-7000-8000-000000000001", CreatedAt: time.Now(), Role: message.RoleAssistant,
		Text:      "Let me read the test output first, then look at the handler.",
		ToolCalls: []message.ToolCall{{ID: "call_1", Name: "run_tests", Arguments: map[string]any{"package": "./pkg/server", "verbose": true, "count": int64(1)}}}}
	keys := [2]*storekey.Key{nil, k}
	var cpu, wall [2]time.Duration
	round := 0
	for b.Loop() {
		for j := range 2 {
			i := (round + j) % 2
			startCPU, start := cpuTime(b), time.Now()
			for range batch {
				body, err := EncodeMessage(keys[i], &m)
				if err != nil {
					b.Fatal(err)
				}
				sum := int64(body.Sum)
				if err := Verify(0, []byte(body.JSON), &sum); err != nil {
					b.Fatal(err)
				}
				var got message.Message
				if err := DecodeMessage(keys[i], &got, []byte(body.JSON)); err != nil || got.Text != m.Text {
					b.Fatal(err)
				}
			}
			wall[i] += time.Since(start)
			cpu[i] += cpuTime(b) - startCPU
		}
		round++
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "plain-cpu-ns/msg")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "sealed-cpu-ns/msg")
	b.ReportMetric(float64(wall[0].Nanoseconds())/n, "plain-ns/msg")
	b.ReportMetric(float64(wall[1].Nanoseconds())/n, "sealed-ns/msg")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "sealed/plain-cpu")
}
