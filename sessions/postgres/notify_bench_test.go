package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// BenchmarkAppendNotify measures what the notification trigger of
// serve replicas (migration 3) costs a write. Each op appends one
// message (with its event), committed, to a session on a schema without
// the trigger and to one on a schema with it, in turn, so that a change
// of the machine's load hits both alike; it reports the mean time of
// each (plain-µs, trigger-µs) and their ratio.
func BenchmarkAppendNotify(b *testing.B) {
	ctx := context.Background()
	newStore := func(trigger bool) *sessions.Store {
		be := openClosed(b, pgtest.DSN(b))
		if !trigger {
			if _, err := be.pool.Exec(ctx, "DROP TRIGGER skein_events_notify ON skein_events"); err != nil {
				b.Fatal(err)
			}
		}
		store, err := sessions.NewStore(be)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Create(ctx, "s", sessions.Info{}); err != nil {
			b.Fatal(err)
		}
		return store
	}
	stores := []*sessions.Store{newStore(false), newStore(true)}
	ch := &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "a message of some length, as a prompt would be"}}}
	var spent [2]time.Duration
	n := 0
	for b.Loop() {
		for i, store := range stores {
			start := time.Now()
			if _, err := store.Apply(ctx, "s", ch); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
		n++
	}
	plain, trigger := float64(spent[0].Microseconds())/float64(n), float64(spent[1].Microseconds())/float64(n)
	b.ReportMetric(plain, "plain-µs")
	b.ReportMetric(trigger, "trigger-µs")
	b.ReportMetric(trigger/plain, "ratio")
}
