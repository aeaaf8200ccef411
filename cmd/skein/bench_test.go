package main

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
)

// BenchmarkConcurrentLoops runs 200 agent_loops at once, each on its own
// session with one tool call, against a loopback OpenAI-compatible server
// that answers every request after 100 ms. Each loop makes two model
// calls, so the ideal wall time is 0.2 s; the benchmark reports the
// measured wall time and its ratio to the ideal, with streamed replies
// (the default) and without. BenchmarkLoopbackFloor measures the same
// traffic with plain net/http: on a 2-core machine the fake server and
// the 200 clients share the cores, and that floor is itself above 0.2 s.
func BenchmarkConcurrentLoops(b *testing.B) {
	for _, stream := range []bool{true, false} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) { concurrentLoops(b, stream) })
	}
}

func concurrentLoops(b *testing.B, stream bool) {
	const loops = 200
	const delay = 100 * time.Millisecond
	fake := newFakeOpenAI(delay)
	defer fake.Close()
	b.Setenv("OPENAI_BASE_URL", fake.URL+"/v1")
	b.Setenv("OPENAI_API_KEY", fakeKey)
	var out bytes.Buffer
	vf := vmFlags{sessionCap: 1000, maxTurns: 50, provider: "openai", model: "gpt-4o-mini"}
	st, closeVM, err := vf.newState(stdio{out: &out, err: &out}, vmConfig{root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer closeVM()
	globals, err := st.ExecFile("tools.star", `
def weather(city):
    """Current weather for a city."""
    return "sunny in " + city
`)
	if err != nil {
		b.Fatal(vm.FormatError(err))
	}
	loop := st.Predeclared()["agent_loop"]
	var total time.Duration
	for i := -1; i < b.N; i++ { // round -1 warms the connection pool, untimed
		var wg sync.WaitGroup
		errs := make(chan error, loops)
		start := time.Now()
		for j := 0; j < loops; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				th := st.NewThread(fmt.Sprintf("loop-%d", j))
				defer st.Release(th)
				kwargs := []starlark.Tuple{
					{starlark.String("session_id"), starlark.String(fmt.Sprintf("s-%d-%d", i, j))},
					{starlark.String("tools"), starlark.NewList([]starlark.Value{globals["weather"]})},
					{starlark.String("stream"), starlark.Bool(stream)},
				}
				r, err := starlark.Call(th, loop, starlark.Tuple{starlark.String("Weather in Paris?")}, kwargs)
				if err != nil {
					errs <- err
					return
				}
				if s, _, _ := r.(*starlark.Dict).Get(starlark.String("status")); s != starlark.String("done") {
					errs <- fmt.Errorf("status %v", s)
				}
			}(j)
		}
		wg.Wait()
		if i >= 0 {
			total += time.Since(start)
		}
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	wall := total / time.Duration(b.N)
	b.ReportMetric(wall.Seconds(), "s-wall")
	b.ReportMetric(wall.Seconds()/(2*delay).Seconds(), "x-ideal")
}
