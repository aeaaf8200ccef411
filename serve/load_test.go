package serve_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/serve/servetest"
	"github.com/skein-dev/skein/sessions"
)

// loadAgent is the mock agent of the load benchmark: one agent loop per
// prompt on the mock provider.
const loadAgent = `
def handle(session_id, text):
    agent_loop(text, session_id = session_id)
`

// followTurns reads a session's event stream and sends, for each stored
// event, its seq and type on out, until the stream ends. It reports
// whether the stream opened: a stream that could not be opened or was
// refused fails t and closes ready, so that its reader does not wait.
func followTurns(t testing.TB, url, id string, ready chan<- struct{}, opened *bool, out chan<- [2]string, stop <-chan struct{}) {
	req, _ := http.NewRequest("GET", url+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		err = fmt.Errorf("%s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err != nil {
		t.Errorf("session %s: event stream: %v", id, err)
		close(ready)
		return
	}
	*opened = true
	defer resp.Body.Close()
	go func() { <-stop; resp.Body.Close() }()
	err = servetest.ScanEvents(resp.Body, ready, func(e servetest.Event) {
		out <- [2]string{strconv.FormatInt(e.Seq, 10), e.Type + ":" + e.Role}
	})
	if err != nil {
		t.Errorf("session %s: %v", id, err)
	}
}

// checkEchoes fails b unless session i's messages are its prompts
// ("s<i> p<n>") and the load agent's echoes of them, in turn.
func checkEchoes(b *testing.B, rec *sessions.Record, i, prompts int) {
	if len(rec.Messages) != 2*prompts {
		b.Errorf("session %d: %d messages", i, len(rec.Messages))
		return
	}
	for p := range prompts {
		want := fmt.Sprintf("s%d p%d", i, p)
		u, a := rec.Messages[2*p], rec.Messages[2*p+1]
		if u.Role != "user" || u.Text != want || a.Role != "assistant" || !strings.HasSuffix(a.Text, want) {
			b.Errorf("session %d turn %d: %q / %q", i, p, u.Text, a.Text)
		}
	}
}

// BenchmarkLoad200x5 runs 200 sessions at once, each sending 5 prompts in
// turn to a Starlark agent on the mock provider, each session followed
// over SSE. It checks that every session ends with its 10 messages in
// order and that every stored event arrived over SSE exactly once, and
// reports the latency from a prompt's POST to its reply's arrival over
// SSE (p50, p99). Run it with -benchtime=1x.
func BenchmarkLoad200x5(b *testing.B) {
	const sessionsN, prompts = 200, 5
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 1000
	for b.Loop() {
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(10*sessionsN))
		if err != nil {
			b.Fatal(err)
		}
		// Every stream comes from this one client address: let it have
		// one per session.
		_, hs := starlarkServer(b, store, loadAgent, sessionsN, func(c *serve.Config) { c.MaxStreamsPerClient = sessionsN })
		var mu sync.Mutex
		var latencies []time.Duration
		var wg sync.WaitGroup
		for i := range sessionsN {
			wg.Go(func() {
				id := call(b, hs, "POST", "/api/sessions", nil, 201)["id"].(string)
				ready, events, stop := make(chan struct{}), make(chan [2]string, 1000), make(chan struct{})
				opened := false
				go followTurns(b, hs.URL, id, ready, &opened, events, stop)
				<-ready
				if !opened {
					return
				}
				seen := map[string]int{}
				for p := range prompts {
					start := time.Now()
					call(b, hs, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": fmt.Sprintf("s%d p%d", i, p)}, 202)
					for {
						e := <-events
						seen[e[0]]++
						if e[1] == "message:assistant" {
							break
						}
					}
					mu.Lock()
					latencies = append(latencies, time.Since(start))
					mu.Unlock()
					// The turn's remaining events (turn_end) follow.
					for {
						s := call(b, hs, "GET", "/api/sessions/"+id, nil, 200)
						if s["running"] == false {
							break
						}
						time.Sleep(time.Millisecond)
					}
				}
				rec, _ := store.Snapshot(b.Context(), id)
				deadline := time.Now().Add(10 * time.Second)
				for len(seen) < len(rec.Events) && time.Now().Before(deadline) {
					select {
					case e := <-events:
						seen[e[0]]++
					case <-time.After(10 * time.Millisecond):
					}
				}
				close(stop)
				for k, n := range seen {
					if n != 1 {
						b.Errorf("session %d: event %s delivered %d times", i, k, n)
					}
				}
				if len(seen) != len(rec.Events) {
					b.Errorf("session %d: %d events over SSE, %d stored", i, len(seen), len(rec.Events))
				}
				checkEchoes(b, rec, i, prompts)
			})
		}
		wg.Wait()
		slices.Sort(latencies)
		if len(latencies) != sessionsN*prompts {
			b.Fatalf("%d turns measured", len(latencies))
		}
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}
