package serve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/serve"
	"github.com/skein-dev/skein/serve/servetest"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// BenchmarkReplicas100 runs two replicas (two servers, each with its own
// VM, store and backend, over one database) and 100 sessions at once:
// session i is created on replica i%2, gets its 3 prompts there, and is
// followed over SSE on both replicas. It checks that every session ends
// with its 6 messages in order and that every stored event arrived
// exactly once on each stream, and reports the delivery latency of the
// stored events (arrival over SSE minus the event's timestamp): on the
// other replica (remote-p50-ms, remote-p99-ms) and on the replica that
// wrote them (local-p50-ms, local-p99-ms), each the median over rounds.
// Run it with -benchtime=5x (five rounds).
func BenchmarkReplicas100(b *testing.B) {
	for _, poll := range []time.Duration{250 * time.Millisecond, 50 * time.Millisecond} {
		b.Run("sqlite/poll="+poll.String(), func(b *testing.B) {
			benchReplicas(b, poll, func(b *testing.B) func() sessions.Backend {
				path := filepath.Join(b.TempDir(), "sessions.db")
				return func() sessions.Backend {
					be, err := sqlite.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					return be
				}
			})
		})
	}
}

// BenchmarkReplicas100Postgres is BenchmarkReplicas100 on PostgreSQL
// (skipped without SKEIN_TEST_POSTGRES): events cross replicas by
// notification (notify), or by polling alone (poll=..., the backend's
// notifier hidden), for comparison.
func BenchmarkReplicas100Postgres(b *testing.B) {
	for _, c := range []struct {
		name   string
		poll   time.Duration
		notify bool
	}{
		{"notify", 250 * time.Millisecond, true},
		{"poll=250ms", 250 * time.Millisecond, false},
		{"poll=50ms", 50 * time.Millisecond, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchReplicas(b, c.poll, func(b *testing.B) func() sessions.Backend {
				dsn := pgtest.DSN(b)
				if _, err := postgres.Migrate(b.Context(), dsn); err != nil {
					b.Fatal(err)
				}
				return func() sessions.Backend {
					be, err := postgres.Open(b.Context(), dsn)
					if err != nil {
						b.Fatal(err)
					}
					if !c.notify {
						return pollOnly{be, be, be, be, be}
					}
					return be
				}
			})
		})
	}
}

// pollOnly is a backend without push notification of events
// (sessions.NotifierBackend).
type pollOnly struct {
	sessions.Backend
	sessions.PartialLoader
	sessions.HistoryBackend
	sessions.EventReader
	sessions.LockerBackend
}

// benchReplicas is BenchmarkReplicas100 over the backends newDB opens:
// each call of newDB is a fresh database, each call of the function it
// returns one more backend over it.
func benchReplicas(b *testing.B, poll time.Duration, newDB func(b *testing.B) func() sessions.Backend) {
	const sessionsN, prompts = 100, 3
	http.DefaultTransport.(*http.Transport).MaxIdleConnsPerHost = 1000
	var rounds [4][]float64 // remote p50, p99, local p50, p99
	for b.Loop() {
		open := newDB(b)
		var servers [2]*httptest.Server
		var stores [2]*sessions.Store
		for r := range servers {
			store, err := sessions.NewStore(open(), sessions.WithCap(10*sessionsN))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { store.Shutdown() })
			_, servers[r] = starlarkServer(b, store, loadAgent, 2*sessionsN, func(c *serve.Config) { c.PollInterval = poll })
			stores[r] = store
		}
		var mu sync.Mutex
		var remote, local []time.Duration
		var wg sync.WaitGroup
		for i := range sessionsN {
			wg.Go(func() {
				home, other := servers[i%2], servers[1-i%2]
				id := call(b, home, "POST", "/api/sessions", nil, 201)["id"].(string)
				far, near := followTimed(b, other.URL, id), followTimed(b, home.URL, id)
				for p := range prompts {
					call(b, home, "POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": fmt.Sprintf("s%d p%d", i, p)}, 202)
					for s := call(b, home, "GET", "/api/sessions/"+id, nil, 200); s["running"] != false; s = call(b, home, "GET", "/api/sessions/"+id, nil, 200) {
						time.Sleep(time.Millisecond)
					}
				}
				rec, err := stores[i%2].Snapshot(b.Context(), id)
				if err != nil {
					b.Error(err)
					return
				}
				farLat, err1 := far.wait(len(rec.Events))
				nearLat, err2 := near.wait(len(rec.Events))
				for _, err := range []error{err1, err2} {
					if err != nil {
						b.Errorf("session %d: %v", i, err)
					}
				}
				mu.Lock()
				remote, local = append(remote, farLat...), append(local, nearLat...)
				mu.Unlock()
				checkEchoes(b, rec, i, prompts)
			})
		}
		wg.Wait()
		for k, lat := range [][]time.Duration{remote, remote, local, local} {
			slices.Sort(lat)
			q := len(lat) / 2
			if k%2 == 1 {
				q = len(lat) * 99 / 100
			}
			rounds[k] = append(rounds[k], float64(lat[q].Microseconds())/1000)
		}
	}
	for k, unit := range []string{"remote-p50-ms", "remote-p99-ms", "local-p50-ms", "local-p99-ms"} {
		slices.Sort(rounds[k])
		b.ReportMetric(rounds[k][len(rounds[k])/2], unit)
	}
}

// timedStream follows a session's SSE stream, recording each stored
// event's seq and delivery latency.
type timedStream struct {
	mu      sync.Mutex
	seen    map[int64]int
	latency []time.Duration
	err     error
	cancel  func()
}

// followTimed opens the session's stream on the server at url and
// returns once its history is sent.
func followTimed(b *testing.B, url, id string) *timedStream {
	req, _ := http.NewRequest("GET", url+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	ts := &timedStream{seen: map[int64]int{}, cancel: func() { resp.Body.Close() }}
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		err := servetest.ScanEvents(resp.Body, ready, func(e servetest.Event) {
			now := time.Now()
			ts.mu.Lock()
			ts.seen[e.Seq]++
			ts.latency = append(ts.latency, now.Sub(e.Timestamp))
			ts.mu.Unlock()
		})
		if err != nil {
			ts.mu.Lock()
			ts.err = err
			ts.mu.Unlock()
		}
	}()
	<-ready
	return ts
}

// wait waits until n distinct events arrived (at most a minute), ends
// the stream, and returns the latencies, or an error for a missing or
// repeated event.
func (ts *timedStream) wait(n int) ([]time.Duration, error) {
	defer ts.cancel()
	deadline := time.Now().Add(time.Minute)
	for {
		ts.mu.Lock()
		got, failed := len(ts.seen), ts.err != nil
		ts.mu.Unlock()
		if got >= n || failed || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.err != nil {
		return nil, ts.err
	}
	for seq := int64(1); seq <= int64(n); seq++ {
		if ts.seen[seq] != 1 {
			return nil, fmt.Errorf("event %d delivered %d times", seq, ts.seen[seq])
		}
	}
	if len(ts.seen) != n {
		return nil, fmt.Errorf("%d events delivered, %d stored", len(ts.seen), n)
	}
	return ts.latency, nil
}
