package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSpansOn is what an in-memory agent loop iteration pays for
// tracing: a chat span (request, reply) and an execute_tool span under
// an invoke_agent span, exported to a loopback receiver in the same
// process (Shutdown at the end included); cpu-ns/op is the process's CPU
// time per iteration, the exporter's and the receiver's included. It
// waits for the exporter every 200 iterations (ForceFlush), so that no
// span is dropped for a full queue: every span is exported.
func BenchmarkSpansOn(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	clearEnv(b)
	b.Setenv(EnvEndpoint, rcv.URL)
	tr := FromEnv(nil)
	ctx := With(context.Background(), tr)
	ctx, agent := Agent(ctx, "", "s1", "mock", "mock-model")
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i++ {
		_, chat := Chat(ctx, ChatRequest{SessionID: "s1", Provider: "mock", Model: "mock-model"})
		chat.Replied(ChatResponse{Provider: "mock", RequestProvider: "mock", Model: "mock-model", InputTokens: 120, OutputTokens: 12, FinishReason: "tool_use"})
		chat.End(nil, "")
		_, tool := Tool(ctx, "noop", "call_1")
		tool.End(nil, "")
		if i%200 == 199 {
			if err := tr.rec.proc.ForceFlush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	agent.End(nil, "")
	if err := tr.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

// cpuNow is the process's CPU time so far.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
