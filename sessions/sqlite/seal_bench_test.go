package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sessionstest"
)

// BenchmarkSealed measures what sealing costs, side by side in one loop
// on two files, one plain and one with a store key (WithKey), taking
// turns at going first, so both see the same machine load:
//
//   - append: one typical message per Write with its "message" event,
//     committed (synchronous=NORMAL, the default): plain-µs/msg,
//     sealed-µs/msg and sealed/plain;
//   - load: LoadTranscript of a 1,000-message session written by the
//     same backend: plain-µs/load, sealed-µs/load and sealed/plain.
func BenchmarkSealed(b *testing.B) {
	key := sessionstest.NewKey(b)
	open := func(k bool) *Backend {
		opts := []Option{}
		if k {
			opts = append(opts, WithKey(key))
		}
		be, err := Open(filepath.Join(b.TempDir(), "sessions.db"), opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Close() })
		return be
	}
	ctx := b.Context()
	now := time.Now()
	b.Run("append", func(b *testing.B) {
		plain, sealed := open(false), open(true)
		for _, be := range []*Backend{plain, sealed} {
			if err := be.Create(ctx, &sessions.Record{ID: "s", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now}); err != nil {
				b.Fatal(err)
			}
		}
		var spent [2]time.Duration
		i := 0
		for b.Loop() {
			for j := range 2 {
				k := (i + j) % 2 // alternate which goes first
				be := []*Backend{plain, sealed}[k]
				m := typical(0)
				ch := &sessions.Change{Append: []message.Message{m}, UpdatedAt: now,
					Events: []sessions.Event{{Seq: int64(i + 1), Type: sessions.EventMessage, Time: now, Data: map[string]any{"index": int64(i), "role": m.Role}}}}
				start := time.Now()
				if err := be.Write(ctx, "s", int64(i), ch); err != nil {
					b.Fatal(err)
				}
				spent[k] += time.Since(start)
			}
			i++
		}
		report(b, spent, "msg")
	})
	b.Run("load", func(b *testing.B) {
		plain, sealed := open(false), open(true)
		for _, be := range []*Backend{plain, sealed} {
			fill(b, be, "s", 1000, typical, true)
		}
		var spent [2]time.Duration
		i := 0
		for b.Loop() {
			for j := range 2 {
				k := (i + j) % 2 // alternate which goes first
				be := []*Backend{plain, sealed}[k]
				start := time.Now()
				rec, _, err := be.LoadTranscript(ctx, "s")
				if err != nil || len(rec.Messages) != 1000 {
					b.Fatal(err)
				}
				spent[k] += time.Since(start)
			}
			i++
		}
		report(b, spent, "load")
	})
}

// report reports the plain and sealed time per unit and their ratio.
func report(b *testing.B, spent [2]time.Duration, unit string) {
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Microseconds())/n, "plain-µs/"+unit)
	b.ReportMetric(float64(spent[1].Microseconds())/n, "sealed-µs/"+unit)
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "sealed/plain")
}
