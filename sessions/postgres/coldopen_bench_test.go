package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// inFlight is a backend that counts its transcript loads in flight and
// keeps the peak.
type inFlight struct {
	*Backend
	now, peak atomic.Int64
}

func (b *inFlight) LoadTranscript(ctx context.Context, id string) (*sessions.Record, int64, error) {
	n := b.now.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	defer b.now.Add(-1)
	return b.Backend.LoadTranscript(ctx, id)
}

// BenchmarkColdOpens opens 64 stored sessions (20 messages each) through
// a new sessions.Store, cold, from 64 goroutines at once (concurrent)
// and one after the other (serial: what a store lock held across the
// loads made of concurrent opens), over a pool of 16 connections. One op
// is both rounds of 64 opens; it reports the medians of each round's
// milliseconds and of their ratio, and "peak", the most opens that were
// inside the backend's transcript load at once (waiting for a pool
// connection included).
func BenchmarkColdOpens(b *testing.B) {
	const n = 64
	be := &inFlight{Backend: openClosed(b, pgtest.DSN(b), WithMaxConns(16))}
	ids := make([]string, n)
	seed, err := sessions.NewStore(be)
	if err != nil {
		b.Fatal(err)
	}
	for i := range ids {
		ids[i] = fmt.Sprint("cold-", i)
		if _, err := seed.Open(b.Context(), ids[i], 0); err != nil {
			b.Fatal(err)
		}
		for k := range 10 {
			if _, err := seed.Apply(b.Context(), ids[i], &sessions.Change{Append: []message.Message{
				{Role: message.RoleUser, Text: fmt.Sprint("question ", k)},
				{Role: message.RoleAssistant, Text: fmt.Sprint("answer ", k)}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	openAll := func(st *sessions.Store, concurrent bool) {
		if !concurrent {
			for _, id := range ids {
				if _, err := st.Open(context.Background(), id, 0); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, id := range ids {
			wg.Go(func() { _, errs[i] = st.Open(context.Background(), id, 0) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	// Each iteration times both, alternately, so that the ratio is of
	// opens measured at the same moment on a machine whose load drifts.
	var serial, concurrent, ratios []float64
	var peak int64
	for b.Loop() {
		for _, conc := range []bool{false, true} {
			b.StopTimer()
			st, err := sessions.NewStore(be, sessions.WithCap(2*n))
			if err != nil {
				b.Fatal(err)
			}
			be.peak.Store(0)
			b.StartTimer()
			start := time.Now()
			openAll(st, conc)
			ms := float64(time.Since(start).Microseconds()) / 1000
			if conc {
				concurrent = append(concurrent, ms)
				ratios = append(ratios, serial[len(serial)-1]/ms)
				peak = max(peak, be.peak.Load())
			} else {
				serial = append(serial, ms)
			}
		}
	}
	b.ReportMetric(median(serial), "serial-ms")
	b.ReportMetric(median(concurrent), "concurrent-ms")
	b.ReportMetric(median(ratios), "serial/concurrent")
	b.ReportMetric(float64(peak), "peak")
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
