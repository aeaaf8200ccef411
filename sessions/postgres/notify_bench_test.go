package postgres

import (
	"context"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// BenchmarkAppendNotify measures what the notification trigger of
// serve replicas (sharedSchema) costs a write: one appended message
// (with its event) per op, committed, on a schema without the trigger
// (plain) and on one with it (trigger), side by side in one run.
func BenchmarkAppendNotify(b *testing.B) {
	for _, trigger := range []bool{false, true} {
		name := "plain"
		if trigger {
			name = "trigger"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			be := openClosed(b, pgtest.DSN(b))
			if trigger {
				if _, err := be.ensureShared(ctx); err != nil {
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
			ch := &sessions.Change{Append: []sessions.Message{{Role: sessions.RoleUser, Text: "a message of some length, as a prompt would be"}}}
			for b.Loop() {
				if _, err := store.Apply(ctx, "s", ch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
